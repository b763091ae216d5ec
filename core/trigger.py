"""Trigger and worker: the two halves every provider binds to its scheduler and queue.

The **trigger** turns a schedule tick (Cloud Scheduler message, timer, local clock) into run
requests: the window is the tick time floored to the schedule, so a double fire or a late tick
yields the same run key; the catch-up policy adds missed windows, oldest first.

The **worker** turns a delivery into a settled message: parse (malformed → dead letter with
the reason), execute through the engine, then ack / retry with backoff / dead-letter.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime

from .backfill import catch_up_windows
from .engine import Engine, Outcome, OutcomeKind, Settle
from .errors import MalformedRunRequest
from .jobs import Job, JobSet
from .logs import get_logger
from .model import RunRequest, format_window
from .ports import REDRIVE_ATTRIBUTE, Delivery, Queue, Store
from .redaction import redact
from .schedule import utc

log = get_logger("trigger")
wlog = get_logger("worker")

POSTPONED_ATTRIBUTE = "cw-postponed"  #: how many times a request was put back without running
MAX_POSTPONEMENTS = 1000  #: then the broker's own retry (counted, bounded) takes over


def request_attributes(request: RunRequest) -> dict[str, str]:
    return {
        "job": request.job,
        "window": format_window(request.window),
        "run_key": request.run_key,
        "reason": request.reason,
    }


class Trigger:
    """Publishes run requests for schedule ticks of ``jobs`` onto ``queue``."""

    def __init__(self, jobs: JobSet, queue: Queue, store: Store | None = None) -> None:
        self.jobs = jobs
        self.queue = queue
        self.store = store

    def tick(
        self, job_name: str, fired_at: datetime, *, reason: str = "schedule"
    ) -> list[RunRequest]:
        """Enqueue the window ``fired_at`` falls in, plus catch-up windows (oldest first)."""
        job = self._job(job_name)
        window = job.schedule.floor(utc(fired_at))
        requests = []
        if self.store is not None and job.catch_up.enabled:
            requests += [
                RunRequest(job.name, w, reason="catch_up")
                for w in catch_up_windows(self.store, job, window)
            ]
        requests.append(RunRequest(job.name, window, reason=reason))
        for request in requests:
            self.publish(request)
        return requests

    def publish(self, request: RunRequest, *, delay: float = 0.0) -> None:
        self.queue.publish(
            request.to_json(),
            attributes=request_attributes(request),
            dedup_id=request.run_key,
            delay=delay,
        )
        log.info(
            "%s: enqueued %s (%s)",
            request.job,
            request.run_key,
            request.reason,
            extra={
                "event": "run.enqueued",
                "job": request.job,
                "run_key": request.run_key,
                "reason": request.reason,
            },
        )

    def _job(self, name: str) -> Job:
        job = self.jobs.get(name)
        if job is None:
            raise KeyError(f"unknown job {name!r}; known: {', '.join(j.name for j in self.jobs)}")
        return job


def _redrive_generation(attributes: Mapping[str, str]) -> int:
    try:
        return max(0, int(attributes.get(REDRIVE_ATTRIBUTE, "0")))
    except (TypeError, ValueError):
        return 0


class Worker:
    """Consumes deliveries from ``queue`` and runs them through ``engine``."""

    def __init__(self, engine: Engine, queue: Queue) -> None:
        self.engine = engine
        self.queue = queue
        ttl = max((engine.lease_ttl(j) for j in engine.jobs), default=None)
        # One renewal interval past the lease: a dead owner's message reappears only once its
        # lease has run out, so the redelivery takes over instead of finding it "in progress".
        self.visibility = (
            ttl.total_seconds() * (1 + engine.settings.renew_fraction) if ttl else 60.0
        )

    def handle(self, delivery: Delivery) -> Outcome | None:
        """Process one delivery and settle it. Returns the outcome (None if malformed)."""
        try:
            request = RunRequest.from_json(delivery.body)
            if request.job not in self.engine.jobs:
                raise MalformedRunRequest(f"unknown job {request.job!r}")
        except MalformedRunRequest as exc:
            self._reject(delivery, "MalformedRequest", str(exc))
            return None
        try:
            outcome = self.engine.execute(
                request,
                redrive=_redrive_generation(delivery.attributes),
                on_renew=lambda: self.queue.extend(delivery, self.visibility),
            )
        except MalformedRunRequest as exc:
            self._reject(delivery, "MalformedRequest", str(exc))
            return None
        except Exception as exc:  # store outage: nothing was decided, try again later
            wlog.error(
                "could not process %s: %s; it will be delivered again",
                request.run_key,
                redact(f"{type(exc).__name__}: {exc}"),
                extra={
                    "event": "worker.error",
                    "run_key": request.run_key,
                    "error_type": type(exc).__name__,
                },
            )
            self.queue.retry(delivery, delay=min(60.0, 2.0 ** min(delivery.attempt, 6)))
            return None
        self.settle(delivery, outcome)
        return outcome

    def settle(self, delivery: Delivery, outcome: Outcome) -> None:
        if outcome.settle is Settle.ACK:
            self.queue.ack(delivery)
        elif outcome.kind in (OutcomeKind.DEFERRED, OutcomeKind.IN_PROGRESS) and self._postpone(
            delivery, outcome.delay
        ):
            return
        elif outcome.settle is Settle.RETRY:
            self.queue.retry(delivery, delay=outcome.delay)
        else:
            self.queue.dead_letter(delivery, outcome.reason, outcome.detail)

    def _postpone(self, delivery: Delivery, delay: float) -> bool:
        """Put a request that has not run (deferred behind the job's lock, or in progress
        elsewhere) back as a fresh message, then ack this delivery: a broker retry would count
        a delivery attempt, and a catch-up window queued behind a few long runs would be
        dead-lettered (max deliveries) without ever having failed. A copy that lands twice is
        harmless: the claim dedupes. False (use the broker's retry) past the cap or on error."""
        try:
            count = int(delivery.attributes.get(POSTPONED_ATTRIBUTE, "0"))
        except ValueError:
            count = 0
        if count >= MAX_POSTPONEMENTS:
            return False
        attributes = {**delivery.attributes, POSTPONED_ATTRIBUTE: str(count + 1)}
        try:
            self.queue.publish(delivery.body, attributes=attributes, delay=max(0.0, delay))
        except Exception as exc:  # broker hiccup: fall back to the broker's retry
            wlog.warning(
                "could not re-enqueue %s: %s; retrying it instead",
                delivery.message_id,
                redact(str(exc)),
                extra={"event": "worker.error", "error_type": type(exc).__name__},
            )
            return False
        self.queue.ack(delivery)
        return True

    def _reject(self, delivery: Delivery, reason: str, detail: str) -> None:
        detail = redact(detail)
        wlog.error(
            "dead-lettered malformed message %s: %s",
            delivery.message_id,
            detail,
            extra={
                "event": "run.dead_lettered",
                "reason": reason,
                "message_id": delivery.message_id,
            },
        )
        self.queue.dead_letter(delivery, reason, detail)

    def poll(self, *, max_messages: int = 1, wait: float = 1.0) -> int:
        """Receive and handle up to ``max_messages``; returns how many were handled."""
        deliveries = self.queue.receive(max_messages, visibility=self.visibility, wait=wait)
        for delivery in deliveries:
            self.handle(delivery)
        return len(deliveries)

    def serve(self, stop: threading.Event, *, wait: float = 1.0) -> None:
        """Handle deliveries until ``stop`` is set."""
        while not stop.is_set():
            try:
                self.poll(wait=wait)
            except Exception as exc:  # broker hiccup: log, back off, keep serving
                wlog.error(
                    "receive failed: %s",
                    redact(str(exc)),
                    extra={"event": "worker.error", "error_type": type(exc).__name__},
                )
                stop.wait(1.0)


__all__ = ["OutcomeKind", "Trigger", "Worker", "request_attributes"]
