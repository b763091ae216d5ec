"""functions-framework entry points: ``trigger``, ``worker`` and ``watcher`` HTTP functions.

The rendered ``main.py`` of a deployment is exactly::

    from cronwarden.adapters.gcp.functions import make_functions
    import my_jobs as jobs_module
    trigger, worker, watcher = make_functions(jobs_module)

Nothing connects at import: the provider (``provider_from_env()`` unless one is given), the
store, the queue and the engine are built on the first request and reused (one per instance).
``$CRONWARDEN_FUNCTIONS`` (comma-separated) limits which of the three answer; the others reply
404 (a watcher-only deployment never builds a queue it does not use).

Status codes (Pub/Sub push redelivers anything but 2xx, after the retryPolicy backoff):

========  ============================================================================
trigger   200 run requests published (catch-up included); 204 a push whose tick is
          malformed or names an unknown job, dead-lettered explicitly with the reason
          (it can never succeed; the DLQ makes it visible); 400 a plain HTTP tick that is
          malformed (Cloud Scheduler logs the failure); 500 publishing failed (retried)
worker    204 done / duplicate / skipped / dead-lettered (published to the DLQ topic with
          ``cw-dead-letter-reason``); 503 retry (failed with attempts left, deferred,
          lease lost, store outage, run still in progress elsewhere); 400 not a push
          envelope (nothing to dead-letter)
watcher   200 healthy; 500 with the active alerts (Cloud Scheduler records the failure)
========  ============================================================================

The worker dead-letters when the *engine* says so (the run record's attempt count reaches the
job's ``max_attempts``, or a permanent error): push deliveries from the emulator carry no
``deliveryAttempt``, and Pub/Sub's own deadLetterPolicy is only the backstop.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from cronwarden.hosting import FUNCTIONS_ENV, HostedRuntime, enabled_functions, jobset_of
from cronwarden.jobs.definitions import JobSet
from cronwarden.model.logs import get_logger, trace_scope
from cronwarden.model.ports import Delivery, Provider
from cronwarden.model.redaction import redact
from cronwarden.model.settlement import Verdict

from .push import (
    ACK_STATUS,
    RETRY_STATUS,
    MalformedEnvelope,
    PushQueue,
    not_before,
    parse_envelope,
    push_reply,
)
from .queue import PubSubQueue
from .ticks import parse_tick

# What only some requests need loads with the first of them, not at the cold start: the engine
# and the worker (trigger and worker requests), the watcher (watcher requests).
if TYPE_CHECKING:
    from cronwarden.run.engine import EngineSettings
    from cronwarden.watch.notify import Notifier
    from cronwarden.watch.watcher import Report

    from ._push_worker import PushWorker

log = get_logger("gcp.functions")

Response = tuple[str, int, dict[str, str]]
HttpFunction = Callable[[Any], Response]


def _json(body: dict[str, Any], status: int) -> Response:
    return json.dumps(body, default=str), status, {"Content-Type": "application/json"}


class FunctionsRuntime(HostedRuntime):
    """What the three functions share; built lazily, once per instance, thread-safe."""

    in_progress_retries = True  #: a push redelivered while its run goes on carries the run

    def __init__(
        self,
        jobs: JobSet,
        *,
        provider: Provider | None = None,
        settings: EngineSettings | None = None,
        notifiers: list[Notifier] | None = None,
    ) -> None:
        super().__init__(jobs, provider=provider, settings=settings, notifiers=notifiers)

    def pubsub(self) -> PubSubQueue:
        return self.queue_of(PubSubQueue, "the GCP trigger and worker functions", "gcp")

    def run_queue(self) -> PubSubQueue:
        return self.pubsub()

    @property
    def push_queue(self) -> PushQueue:
        """Deprecated: the old settlement shim over :meth:`pubsub`."""
        return PushQueue(self.pubsub())

    # -- the three handlers -----------------------------------------------------------------
    def handle_trigger(self, raw: bytes, headers: dict[str, str]) -> Response:
        tick, delivery, error = parse_tick(raw, headers)
        if tick is not None and tick.job not in self.jobs:
            error = f"tick for unknown job {tick.job!r}"
            tick = None
        if tick is None:
            return self._bad_tick(delivery, error)
        try:
            requests = self.trigger.tick(tick.job, tick.fired_at, reason="schedule")
        except Exception as exc:
            log.error(
                "trigger for %s failed: %s; it will be retried",
                tick.job,
                redact(f"{type(exc).__name__}: {exc}"),
                extra={"event": "trigger.error", "job": tick.job},
            )
            return _json({"error": "could not enqueue the run request"}, 500)
        return _json({"job": tick.job, "run_keys": [r.run_key for r in requests]}, 200)

    def _bad_tick(self, delivery: Delivery | None, error: str) -> Response:
        if delivery is None:
            log.error(
                "rejected a malformed tick: %s",
                error,
                extra={"event": "trigger.rejected", "reason": "MalformedTick"},
            )
            return _json({"error": error}, 400)
        log.error(
            "dead-lettered a malformed scheduler message %s: %s",
            delivery.message_id,
            error,
            extra={
                "event": "run.dead_lettered",
                "reason": "MalformedTick",
                "message_id": delivery.message_id,
            },
        )
        reply = push_reply(Verdict.dead_letter("MalformedTick", error), delivery, self.pubsub())
        return _json({"dead_lettered": "MalformedTick", "error": error}, reply.status)

    def handle_worker(self, raw: bytes) -> Response:
        try:
            delivery = parse_envelope(raw)
        except MalformedEnvelope as exc:
            log.error(
                "rejected a request that is not a Pub/Sub push: %s",
                exc,
                extra={"event": "worker.rejected", "reason": "MalformedEnvelope"},
            )
            return _json({"error": str(exc)}, 400)
        wait = not_before(delivery)
        if wait > 0:  # a delayed publish pushed early: hand it back (costs a delivery)
            return _json({"verdict": "retry", "not_before_s": round(wait, 3)}, RETRY_STATUS)
        decision = self.worker.decide(delivery)  # no extension: the ackDeadline bounds a push
        reply = push_reply(decision.verdict, delivery, self.pubsub())
        body: dict[str, Any] = {"verdict": reply.verdict}
        outcome = decision.outcome
        if outcome is not None:
            body.update(outcome=outcome.kind.value, run_key=outcome.run_key)
            if outcome.run_id:
                body["run_id"] = outcome.run_id
        if reply.reason:
            body["reason"] = reply.reason
        return _json(body, reply.status)

    def handle_watcher(self) -> Response:
        try:
            report = self.watcher.check()
        except Exception as exc:
            text = redact(f"{type(exc).__name__}: {exc}")
            log.error("watcher check failed: %s", text, extra={"event": "watcher.error"})
            return _json({"ok": False, "error": text}, 500)
        return _json(summary(report), 200 if report.ok else 500)


def summary(report: Report) -> dict[str, Any]:
    """The watcher function's JSON reply."""
    return {
        "ok": report.ok,
        "dlq_depth": report.dlq_depth,
        "active": [{**a.fields(), "text": a.text} for a in report.active],
        "fired": len(report.fired),
        "recovered": len(report.recovered),
        "jobs": {h.job.name: sorted(c.value for c in h.conditions) for h in report.jobs},
    }


def make_functions(
    module_or_jobset: ModuleType | JobSet | str,
    *,
    provider: Provider | None = None,
    settings: EngineSettings | None = None,
    notifiers: list[Notifier] | None = None,
    configure_logging: bool | None = None,
) -> tuple[HttpFunction, HttpFunction, HttpFunction]:
    """``(trigger, worker, watcher)``: functions-framework HTTP functions (Flask request in,
    ``(body, status, headers)`` out) for the jobs of ``module_or_jobset``.

    ``provider`` defaults to ``provider_from_env()`` on the first request; ``notifiers`` to a
    JSON log line plus a webhook when ``$CRONWARDEN_WEBHOOK_URL`` is set. Logs go as JSON lines
    to stdout (Cloud Logging parses them) when ``configure_logging`` is true, by default when
    running on Cloud Functions / Cloud Run (``$K_SERVICE`` set).
    """
    runtime = FunctionsRuntime(
        jobset_of(module_or_jobset), provider=provider, settings=settings, notifiers=notifiers
    )
    if configure_logging is None:
        configure_logging = bool(os.environ.get("K_SERVICE"))
    if configure_logging:
        from cronwarden.model.logs import configure

        configure(logging.INFO, stream=sys.stdout)
    enabled = enabled_functions()

    def disabled(name: str) -> Response | None:
        if name in enabled:
            return None
        return _json({"error": f"{name} is not enabled here ({FUNCTIONS_ENV})"}, 404)

    def trigger(request: Any) -> Response:
        """Schedule tick (Pub/Sub push or Cloud Scheduler HTTP) → run requests."""
        return disabled("trigger") or runtime.handle_trigger(
            request.get_data(), dict(request.headers)
        )

    def worker(request: Any) -> Response:
        """Pub/Sub push of a run request → one execution under the run protocol."""
        headers = request.headers
        trace = headers.get("traceparent") or headers.get("X-Cloud-Trace-Context")
        with trace_scope(trace):  # log lines carry the request's trace id
            return disabled("worker") or runtime.handle_worker(request.get_data())

    def watcher(request: Any) -> Response:
        """Liveness check of every job (and the dead-letter queue)."""
        return disabled("watcher") or runtime.handle_watcher()

    for fn in (trigger, worker, watcher):
        fn.__dict__["cronwarden_runtime"] = runtime
    return trigger, worker, watcher


def runtime_of(function: Callable[..., Any]) -> FunctionsRuntime:
    """The :class:`FunctionsRuntime` behind a function made by :func:`make_functions`."""
    runtime = getattr(function, "cronwarden_runtime", None)
    if not isinstance(runtime, FunctionsRuntime):
        raise TypeError(f"{function!r} was not made by make_functions")
    return runtime


def __getattr__(name: str) -> Any:
    if name == "PushWorker":  # deprecated; it loads the engine, so only when asked for
        from ._push_worker import PushWorker

        return PushWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ACK_STATUS",
    "RETRY_STATUS",
    "FunctionsRuntime",
    "PushWorker",
    "make_functions",
    "runtime_of",
    "summary",
]
