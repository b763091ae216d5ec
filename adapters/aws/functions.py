"""AWS Lambda handlers: ``trigger`` (EventBridge Scheduler ticks), ``worker`` (SQS event source
mapping with partial batch responses) and ``watcher`` (its own schedule).

The rendered ``handler.py`` of a deployment is exactly::

    from cronwarden.adapters.aws.functions import make_handlers
    import my_jobs as jobs_module
    trigger, worker, watcher = make_handlers(jobs_module)

and the three functions' handlers are ``handler.trigger``, ``handler.worker``,
``handler.watcher``. Nothing connects at import: the provider (``provider_from_env()`` unless
one is given), store, queue and engine are built on the first invocation and reused.

Event shapes (as AWS sends them):

* **trigger**: the schedule's target input, decoded by Lambda: ``{"v": 1, "job": "<name>",
  "scheduled_time": "2026-01-20T01:00:00Z"}`` (see :mod:`.schedules`), or an SQS event of such
  bodies when a deployment routes ticks through a queue. A malformed tick or a failed publish
  raises: EventBridge Scheduler retries it (its retry policy) and then puts it on the schedule's
  own dead-letter queue, which the watcher's alarm covers. Never a silent success.
* **worker**: ``{"Records": [{"messageId", "receiptHandle", "body", "attributes":
  {"ApproximateReceiveCount", ...}, "messageAttributes": {...}, "eventSource": "aws:sqs", ...}]}``.
  The reply is ``{"batchItemFailures": [{"itemIdentifier": "<messageId>"}, ...]}`` (the
  function's event source mapping has ``ReportBatchItemFailures``): Lambda deletes every record
  not listed; a listed record stays and comes back after its visibility timeout, counted by
  ``maxReceiveCount``.
* **watcher**: any event (a schedule); returns the report summary. The watcher may watch jobs
  running in another cloud (``CRONWARDEN_PROVIDER=gcp|azure``): the provider is built from the
  environment like anywhere else, after the secrets ``CRONWARDEN_AWS_SECRET_ENVIRONMENT`` names
  are read into it (:func:`.secrets.load_secret_environment`, once per execution environment,
  before the first handler call builds the provider); a GCP reader federates from the function's
  role (``CRONWARDEN_GCP_WIF_SOURCE=aws``). A watcher that cannot read the other cloud raises:
  the invocation fails and the deployment's error alarm pages.

**Settlement** (:func:`apply_verdict`): the core worker decides once per record; the verdict is
applied here. ``ack`` → not listed (Lambda deletes it). ``retry(delay)`` →
``ChangeMessageVisibility(delay)`` on the record, then listed. ``postpone(delay)`` → a fresh copy
sent with the delay (chained past 15 minutes), the record not listed. ``dead_letter(reason)`` →
sent to the DLQ with the reason as message attributes, the record not listed. Whatever fails
while applying a verdict lists the record: it is delivered again, never dropped.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from cronwarden.hosting import HostedRuntime, enabled_functions, jobset_of
from cronwarden.jobs.definitions import JobSet
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.logs import get_logger
from cronwarden.model.ports import Delivery, Provider
from cronwarden.model.redaction import redact
from cronwarden.model.runs import RunRequest
from cronwarden.model.settlement import Action, Verdict, republish

from .queue import SqsQueue, delivery_of_message
from .schedules import MalformedTick, due_window, parse_tick
from .secrets import load_secret_environment, webhook_url

# The engine and the watcher load with the first invocation that needs them, not at the cold
# start: a trigger or a worker never builds the watcher, a watcher never builds the engine.
if TYPE_CHECKING:
    from cronwarden.run.engine import EngineSettings
    from cronwarden.watch.notify import Notifier
    from cronwarden.watch.watcher import Report, Watcher

log = get_logger("aws.functions")

Handler = Callable[[Any, Any], dict[str, Any]]
LAMBDA_MAX_TIMEOUT = 900  #: seconds: the longest a Lambda invocation may run


def _extender(sqs: SqsQueue, delivery: Delivery, visibility: float) -> Callable[[], None]:
    """Keep ``delivery`` invisible for ``visibility`` more seconds on every lease renewal."""
    return lambda: sqs.extend(delivery, visibility)


def apply_verdict(sqs: SqsQueue, delivery: Delivery, verdict: Verdict | None) -> bool:
    """Apply ``verdict`` to a record Lambda delivered; True when the record must be listed in
    ``batchItemFailures`` (left on the queue). No verdict at all lists it too."""
    try:
        if verdict is None:
            return True
        if verdict.action is Action.ACK:
            return False
        if verdict.action is Action.RETRY:
            sqs.retry(delivery, verdict.delay)
            return True
        if verdict.action is Action.POSTPONE:
            if republish(sqs, delivery, verdict.delay):
                return False
            sqs.retry(delivery, verdict.delay)
            return True
        sqs.send_dead_letter(delivery.body, delivery.attributes, verdict.reason, verdict.detail)
        return False
    except Exception as exc:  # the record stays: redelivered after its visibility timeout
        log.error(
            "could not settle message %s (%s): %s; it will be delivered again",
            delivery.message_id,
            verdict.action.value if verdict else "none",
            redact(f"{type(exc).__name__}: {exc}"),
            extra={"event": "worker.error", "error_type": type(exc).__name__},
        )
        return True


class LambdaRuntime(HostedRuntime):
    """What the three handlers share; built lazily, once per execution environment."""

    def __init__(
        self,
        jobs: JobSet,
        *,
        provider: Provider | None = None,
        settings: EngineSettings | None = None,
        notifiers: list[Notifier] | None = None,
    ) -> None:
        super().__init__(jobs, provider=provider, settings=settings, notifiers=notifiers)
        self.last_report: Report | None = None
        self._secrets_loaded = provider is not None

    def load_secrets(self) -> None:
        """Read the secret environment (:mod:`.secrets`) once, before the provider is built
        from the environment; a failure raises and is tried again on the next invocation."""
        if self._secrets_loaded:
            return
        with self._lock:
            if not self._secrets_loaded:
                names = load_secret_environment()
                if names:
                    log.info(
                        "read %d secret(s) into the environment: %s",
                        len(names),
                        ", ".join(names),
                        extra={"event": "secrets.loaded"},
                    )
                self._secrets_loaded = True

    def sqs(self) -> SqsQueue:
        return self.queue_of(SqsQueue, "the AWS trigger and worker functions", "aws")

    def run_queue(self) -> SqsQueue:
        return self.sqs()

    @property
    def watcher(self) -> Watcher:
        """The core watcher; its webhook URL may come by reference (:mod:`.secrets`). With an
        alerting settings file, that webhook joins the file's routed channels (never replaces
        them)."""
        with self._lock:
            if self._watcher is None and self._notifiers is None:
                url = webhook_url()
                if url and self.alerting.source == "environment":
                    from cronwarden.watch.notify import LogNotifier, WebhookNotifier

                    self._notifiers = [LogNotifier(), WebhookNotifier(url)]
                elif url and self.host.webhook_url != url:
                    self._host = dataclasses.replace(self.host, webhook_url=url)
                    self._alerting = None  # read again, with the `webhook` channel
        return super().watcher

    # -- trigger ------------------------------------------------------------------------------
    def handle_tick(self, event: Any) -> dict[str, Any]:
        """One EventBridge Scheduler tick (or an SQS batch of them)."""
        if isinstance(event, Mapping) and isinstance(event.get("Records"), list):
            failures = []
            for record in event["Records"]:
                try:
                    self._tick(record.get("body", ""))
                except Exception:
                    failures.append({"itemIdentifier": str(record.get("messageId", ""))})
            return {"batchItemFailures": failures}
        return self._tick(event)

    def _tick(self, event: Any) -> dict[str, Any]:
        try:
            tick = parse_tick(event)
            job = self.jobs.get(tick.job)
            if job is None:
                raise MalformedTick(f"tick for unknown job {tick.job!r}")
        except MalformedTick as exc:
            log.error(
                "rejected a malformed tick: %s",
                exc,
                extra={"event": "trigger.rejected", "reason": "MalformedTick"},
            )
            raise
        window = due_window(job, tick.scheduled_time)
        if window is None:
            log.info(
                "%s: tick at %s is not the first after a window of %s; nothing to enqueue",
                job.name,
                tick.scheduled_time.isoformat(),
                job.schedule.describe(),
                extra={"event": "trigger.skipped", "job": job.name, "reason": "not_due"},
            )
            return {"job": job.name, "run_keys": []}
        requests: list[RunRequest] = self.trigger.tick(job.name, window, reason="schedule")
        return {"job": job.name, "run_keys": [r.run_key for r in requests]}

    # -- worker -------------------------------------------------------------------------------
    def handle_batch(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """An SQS event → one execution per record → ``batchItemFailures``."""
        records = event.get("Records")
        if not isinstance(records, list):
            raise ValueError("not an SQS event: no Records")
        sqs = self.sqs()
        worker = self.worker
        visibility = worker.visibility
        failures: list[dict[str, str]] = []
        for record in records:
            delivery = delivery_of_message(record)
            verdict: Verdict | None
            try:
                verdict = worker.decide(
                    delivery, extend=_extender(sqs, delivery, visibility)
                ).verdict
            except Exception as exc:  # nothing decided: leave it for redelivery
                log.error(
                    "could not process message %s: %s",
                    delivery.message_id,
                    redact(f"{type(exc).__name__}: {exc}"),
                    extra={"event": "worker.error", "error_type": type(exc).__name__},
                )
                verdict = None
            if apply_verdict(sqs, delivery, verdict):
                failures.append({"itemIdentifier": delivery.message_id})
        return {"batchItemFailures": failures}

    # -- watcher ------------------------------------------------------------------------------
    def handle_watcher(self) -> dict[str, Any]:
        report = self.watcher.check()
        self.last_report = report
        return {
            "ok": report.ok,
            "dlq_depth": report.dlq_depth,
            "active": [{**a.fields(), "text": a.text} for a in report.active],
            "fired": len(report.fired),
            "recovered": len(report.recovered),
        }


def make_handlers(
    module_or_jobset: ModuleType | JobSet | str,
    *,
    provider: Provider | None = None,
    settings: EngineSettings | None = None,
    notifiers: list[Notifier] | None = None,
    configure_logging: bool | None = None,
) -> tuple[Handler, Handler, Handler]:
    """``(trigger, worker, watcher)`` Lambda handlers ``(event, context) -> dict`` for the jobs
    of ``module_or_jobset`` (see the module docstring). Logs go as JSON lines to stdout
    (CloudWatch Logs) when ``configure_logging`` is true, by default inside Lambda."""
    runtime = LambdaRuntime(
        jobset_of(module_or_jobset), provider=provider, settings=settings, notifiers=notifiers
    )
    if configure_logging is None:
        configure_logging = bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))
    if configure_logging:
        from cronwarden.model.logs import configure

        configure(logging.INFO, stream=sys.stdout)
    enabled = enabled_functions()

    def check(name: str) -> None:
        if name not in enabled:
            raise ConfigurationError(
                f"{name} is not enabled in this function (CRONWARDEN_FUNCTIONS)"
            )

    def trigger(event: Any, context: Any = None) -> dict[str, Any]:
        """EventBridge Scheduler tick → run requests on SQS."""
        check("trigger")
        runtime.load_secrets()
        return runtime.handle_tick(event)

    def worker(event: Any, context: Any = None) -> dict[str, Any]:
        """SQS batch → executions → partial batch response."""
        check("worker")
        runtime.load_secrets()
        return runtime.handle_batch(event)

    def watcher(event: Any, context: Any = None) -> dict[str, Any]:
        """Liveness check of every job and the dead-letter queue."""
        check("watcher")
        runtime.load_secrets()
        return runtime.handle_watcher()

    for fn in (trigger, worker, watcher):
        fn.__dict__["cronwarden_runtime"] = runtime
    return trigger, worker, watcher


def runtime_of(handler: Callable[..., Any]) -> LambdaRuntime:
    runtime = getattr(handler, "cronwarden_runtime", None)
    if not isinstance(runtime, LambdaRuntime):
        raise TypeError(f"{handler!r} was not made by make_handlers")
    return runtime


__all__ = [
    "LAMBDA_MAX_TIMEOUT",
    "LambdaRuntime",
    "apply_verdict",
    "make_handlers",
    "runtime_of",
]
