"""Trigger and worker: the two halves every provider binds to its scheduler and queue.

The **trigger** turns a schedule tick (Cloud Scheduler message, timer, local clock) into run
requests: the window is the tick time floored to the schedule, so a double fire or a late tick
yields the same run key; the catch-up policy adds missed windows, oldest first.

The **worker** turns a delivery into a decision: parse (malformed → dead letter with the
reason), execute through the engine, then one :class:`~cronwarden.model.settlement.Verdict` (ack /
retry with backoff / postpone / dead-letter) that the host applies its own way.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..jobs.definitions import Job, JobSet
from ..model.errors import MalformedRunRequest, StoreUnavailable
from ..model.logs import get_logger
from ..model.ports import (
    AFTER_ATTRIBUTE,
    REDRIVE_ATTRIBUTE,
    Delivery,
    Outgoing,
    Publisher,
    Queue,
    Store,
)
from ..model.redaction import redact
from ..model.runs import RunRequest, format_window, parse_window, request_attributes
from ..model.schedule import utc
from ..model.settlement import (
    MAX_POSTPONEMENTS,
    POSTPONED_ATTRIBUTE,
    Verdict,
    capped,
    settle_on,
    verdict_for,
)
from ..run.backfill import catch_up_windows
from ..run.engine import Engine, Outcome, OutcomeKind
from ..watch.probe import answer_probe, probe_token

log = get_logger("trigger")
wlog = get_logger("worker")
#: seconds a pull worker keeps sending a settlement the queue did not take (StoreUnavailable)
SETTLE_RETRY_FOR = 30.0


class Trigger:
    """Publishes run requests for schedule ticks of ``jobs`` onto ``queue``."""

    def __init__(self, jobs: JobSet, queue: Publisher, store: Store | None = None) -> None:
        self.jobs = jobs
        self.queue = queue
        self.store = store

    def tick(
        self, job_name: str, fired_at: datetime, *, reason: str = "schedule"
    ) -> list[RunRequest]:
        """Enqueue the window ``fired_at`` falls in, plus catch-up windows (oldest first).

        With catch-up windows, the current window is the last of their oldest-first batch: it
        waits, like each of them, while the window before it can still run, so it never starts
        before an older window of the tick with any number of workers.

        A dependent job (``after=``) is never fired by time: a tick for it (a scheduler a
        deployment still has) enqueues nothing and logs a warning; its upstreams' completions
        enqueue its windows."""
        job = self._job(job_name)
        if not job.timed:
            log.warning(
                "%s: ignored a schedule tick: it runs after %s succeeded, never by time "
                "(remove its scheduler)",
                job.name,
                ", ".join(job.after),
                extra={"event": "trigger.ignored", "job": job.name},
            )
            return []
        window = job.schedule.floor(utc(fired_at))
        requests = []
        if self.store is not None and job.catch_up.enabled:
            requests += [
                RunRequest(job.name, w, reason="catch_up")
                for w in catch_up_windows(self.store, job, window)
            ]
        requests.append(RunRequest(job.name, window, reason=reason))
        self.publish_oldest_first(requests)
        return requests

    def publish_oldest_first(self, requests: list[RunRequest]) -> None:
        """Publish a batch of catch-up / backfill requests of one job (a tick's batch ends with
        its current window) so that they run oldest first with any number of workers: each
        carries the window before it (:data:`~cronwarden.model.ports.AFTER_ATTRIBUTE`) and waits
        while that one can still run."""
        ordered = sorted(requests, key=lambda r: r.window)
        if len(ordered) == 1:
            self.publish(ordered[0])
            return
        messages = []
        for previous, request in zip([None, *ordered], ordered, strict=False):
            attributes = request_attributes(request)
            if previous is not None:
                attributes[AFTER_ATTRIBUTE] = format_window(previous.window)
            messages.append(Outgoing(request.to_json(), attributes, request.run_key))
        self.queue.publish_many(messages)  # one round trip where the broker can batch
        for request in ordered:
            _log_enqueued(request)

    def publish(
        self, request: RunRequest, *, delay: float = 0.0, after: datetime | None = None
    ) -> None:
        attributes = request_attributes(request)
        if after is not None:
            attributes[AFTER_ATTRIBUTE] = format_window(after)
        self.queue.publish(
            request.to_json(),
            attributes=attributes,
            dedup_id=request.run_key,
            delay=delay,
        )
        _log_enqueued(request)

    def _job(self, name: str) -> Job:
        job = self.jobs.get(name)
        if job is None:
            raise KeyError(f"unknown job {name!r}; known: {', '.join(j.name for j in self.jobs)}")
        return job


def _log_enqueued(request: RunRequest) -> None:
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


class WindowRefused(ValueError):
    """A requested window is not one of the job's windows, or is in the future."""


def check_window(job: Job, when: datetime, now: datetime) -> datetime:
    """``when`` as a window of ``job`` that may run by hand now; else :class:`WindowRefused`
    with one line naming the nearest windows before and after.

    A window must be one of the schedule's (no silent flooring: ``--window 02:07`` of an
    hourly job is refused, not run as 02:00) and not in the future (a run of a future window
    would sit among the job's records as if that time had come), nor before the year 1000
    (a typo: ``0202-...``; near the year 1 the schedule cannot be stepped back)."""
    when, now = utc(when), utc(now)
    if when.year < 1000:
        raise WindowRefused(
            f"{job.name}: window {when.isoformat()} is before the year 1000; "
            "give a window like 2026-01-20T02:00Z"
        )
    latest = job.schedule.floor(now)
    if when > latest:
        upcoming = format_window(job.schedule.next_after(now))
        raise WindowRefused(
            f"{job.name}: window {when:%Y-%m-%dT%H:%MZ} is in the future; nearest windows: "
            f"{format_window(latest)} before (the latest due), {upcoming} after (not due yet)"
        )
    floor = job.schedule.floor(when)
    if floor != when:
        after = job.schedule.next_after(floor)
        nearest = f"nearest windows: {format_window(floor)} before, " + (
            f"{format_window(after)} after" if after <= latest else "none due after"
        )
        raise WindowRefused(
            f"{job.name}: {when:%Y-%m-%dT%H:%M:%SZ} is not a window of {job.schedule.cron} "
            f"({job.schedule.timezone}); {nearest}"
        )
    return when


def _redrive_generation(attributes: Mapping[str, str]) -> int:
    try:
        return max(0, int(attributes.get(REDRIVE_ATTRIBUTE, "0")))
    except (TypeError, ValueError):
        return 0


def _after(attributes: Mapping[str, str]) -> datetime | None:
    text = attributes.get(AFTER_ATTRIBUTE)
    if not text:
        return None
    try:
        return parse_window(text)
    except MalformedRunRequest:
        return None


def _is_event(delivery: Delivery) -> bool:
    """Whether the body is an event consumer's request (``"kind": "event"`` at its top)."""
    if delivery.attributes.get("kind") == "event":
        return True
    if b'"event"' not in bytes(delivery.body):
        return False
    try:
        body = json.loads(delivery.body)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(body, dict) and body.get("kind") == "event"


def lease_visibility(engine: Engine) -> float:
    """How long a pulled delivery stays invisible: the longest lease TTL plus one renewal
    interval (``ttl * (1 + renew_fraction)``), 60 s without jobs.

    A redelivery must come only after the lease has run out (else it is judged "in progress"),
    and visibility is extended at most one renewal interval after the lease moved. Every pull
    host takes this value as it is: apply the factor here, once."""
    consumers = [engine.jobs.consumer_job(name) for name in engine.jobs.consumers]
    every = [*engine.jobs, *(c for c in consumers if c is not None)]
    ttl = max((engine.lease_ttl(j) for j in every), default=None)
    return ttl.total_seconds() * (1 + engine.settings.renew_fraction) if ttl else 60.0


@dataclass(frozen=True)
class Decision:
    """What the worker decided for one delivery: the :class:`Verdict` a host applies, and the
    engine's outcome (``None`` when the request was malformed or the store was unreachable)."""

    verdict: Verdict
    outcome: Outcome | None = None


class Worker:
    """Turns deliveries into decisions through ``engine``; on a pull queue, also settles them.

    :meth:`decide` is what every host calls: it parses, executes and returns a
    :class:`Decision` without touching any broker. :meth:`handle` / :meth:`poll` /
    :meth:`serve` are the pull consumer's loop over ``queue`` (needed only for those), applying
    each verdict with :func:`~cronwarden.model.settlement.settle_on`.
    ``in_progress_retries`` is the push hosts' variant of the mapping (see
    :func:`~cronwarden.model.settlement.verdict_for`).

    A settlement the pull queue did not take (:class:`~cronwarden.model.errors.StoreUnavailable`:
    a database restarting, a file locked by a paused writer) is sent again with backoff for up
    to :attr:`settle_retry_for` seconds: otherwise the delivery would only come back when its
    visibility ran out (a lease TTL later), past a short job's grace. Settlements are safe to
    repeat: each names the delivery's receipt (a postponement's copy that lands twice is
    deduplicated by the claim).
    """

    settle_retry_for: float = SETTLE_RETRY_FOR

    def __init__(
        self,
        engine: Engine,
        queue: Queue | None = None,
        *,
        in_progress_retries: bool = False,
        publisher: Publisher | Callable[[], Publisher] | None = None,
    ) -> None:
        """``publisher``: where the completion of a job with dependents publishes their run
        requests (default: ``queue``; a callable is called when first needed). Without one,
        the outbox sweep publishes them."""
        self.engine = engine
        self._queue = queue
        self.in_progress_retries = in_progress_retries
        self.visibility = lease_visibility(engine)
        self._publisher = publisher if publisher is not None else queue
        #: the next delivery of a batch and its request, parsed when it was passed as ``then``
        self._parsed_next: tuple[Delivery | None, RunRequest | None] = (None, None)

    @property
    def queue(self) -> Queue:
        if self._queue is None:
            raise TypeError("this worker has no pull queue: use decide() and apply the verdict")
        return self._queue

    def decide(
        self,
        delivery: Delivery,
        *,
        extend: Callable[[], None] | None = None,
        then: Delivery | None = None,
    ) -> Decision:
        """Parse, execute and decide, once. ``extend`` is called on every lease renewal (keep
        the delivery invisible as long as the lease). Never settles anything itself.
        ``then``: the delivery this worker decides next on this thread, for certain (the next
        of its batch): its claim may ride in this run's completion (``Engine.execute``)."""
        token = probe_token(delivery)
        if token is not None:  # ``cronwarden doctor``'s probe: acknowledged, never run
            answer_probe(self.engine.store, token, self.engine.worker_id, self.engine.now())
            return Decision(Verdict.ack("probe"))
        try:
            seen, parsed = self._parsed_next
            request = parsed if seen is delivery and parsed is not None else self._request(delivery)
        except MalformedRunRequest as exc:
            return Decision(self._reject(delivery, "MalformedRequest", str(exc)))
        try:
            outcome = self.engine.execute(
                request,
                redrive=_redrive_generation(delivery.attributes),
                on_renew=extend,
                after=_after(delivery.attributes),
                then=self._plain_request(then),
            )
        except MalformedRunRequest as exc:
            return Decision(self._reject(delivery, "MalformedRequest", str(exc)))
        except Exception as exc:  # store outage: nothing was decided, try again later
            text = redact(f"{type(exc).__name__}: {exc}")
            wlog.error(
                "could not process %s: %s; it will be delivered again",
                request.run_key,
                text,
                extra={
                    "event": "worker.error",
                    "run_key": request.run_key,
                    "error_type": type(exc).__name__,
                },
            )
            delay = min(60.0, 2.0 ** min(delivery.attempt, 6))
            return Decision(Verdict.retry(delay, type(exc).__name__, text))
        if outcome.kind is OutcomeKind.SUCCEEDED and request.slot is None:
            self._completed(request)
        verdict = verdict_for(outcome, in_progress_retries=self.in_progress_retries)
        return Decision(capped(verdict, delivery), outcome)

    def _request(self, delivery: Delivery) -> RunRequest:
        """The delivery's run request: a scheduled / dependent job's, or an event consumer's
        (its schema checked again and its key recomputed from the event); raises
        :class:`MalformedRunRequest` (a :class:`~cronwarden.jobs.consumers.MalformedEvent` for an
        event) with the reason."""
        jobs = self.engine.jobs
        if _is_event(delivery):
            from ..jobs.consumers import decode_event_request

            event = decode_event_request(delivery.body, jobs.consumers)
            payload: Any = event.event  # ctx.payload is the event itself
            return RunRequest(
                event.consumer,
                utc(event.published_at).replace(second=0, microsecond=0),
                reason="event",
                payload=payload,
                slot=event.slot,
            )
        request = RunRequest.from_json(delivery.body)
        if request.job not in jobs:
            raise MalformedRunRequest(f"unknown job {request.job!r}")
        return request

    def _plain_request(self, delivery: Delivery | None) -> RunRequest | None:
        """``delivery``'s run request when its claim could ride in a completion: a scheduled
        window's (no probe, event, redrive or ordering after another window); else None."""
        if (
            delivery is None
            or probe_token(delivery) is not None
            or _is_event(delivery)
            or _redrive_generation(delivery.attributes)
            or _after(delivery.attributes) is not None
        ):
            return None
        try:
            request = self._request(delivery)
        except (MalformedRunRequest, ValueError):
            return None
        self._parsed_next = (delivery, request)  # decided next: parsed once
        return request

    def _completed(self, request: RunRequest) -> None:
        """After a success of a job with dependents: publish their run requests (the outbox
        records are already in the store; a failure here is left to the sweep)."""
        jobs = self.engine.jobs
        job = jobs.get(request.job)
        if job is None or not jobs.dependents_of(job.name):
            return
        from ..run.dependencies import publish_completion

        publisher = self._publisher
        try:
            target = publisher() if callable(publisher) else publisher
        except Exception as exc:
            target = None
            wlog.error("no publisher for completion events: %s", redact(str(exc)))
        if target is None:
            wlog.warning(
                "%s: no publisher for completion events; the outbox sweep publishes them",
                request.run_key,
                extra={"event": "dependency.no_publisher", "run_key": request.run_key},
            )
            return
        publish_completion(target, jobs, job, request.window)

    def handle(self, delivery: Delivery, *, then: Delivery | None = None) -> Outcome | None:
        """Decide one pulled delivery and settle it on :attr:`queue`. Returns the outcome.
        ``then``: the delivery handled next, for certain (see :meth:`decide`)."""
        queue = self.queue
        decision = self.decide(
            delivery, extend=lambda: queue.extend(delivery, self.visibility), then=then
        )
        self._settle_on(queue, delivery, decision.verdict)
        return decision.outcome

    def _settle_on(self, queue: Queue, delivery: Delivery, verdict: Verdict) -> None:
        """:func:`settle_on`, sent again while the queue reports it unavailable (see the class
        docstring); the last error is raised once :attr:`settle_retry_for` has passed."""
        give_up = time.monotonic() + self.settle_retry_for
        pause = 0.1
        while True:
            try:
                settle_on(queue, delivery, verdict)
                return
            except StoreUnavailable as exc:
                if time.monotonic() + pause >= give_up:
                    raise
                wlog.warning(
                    "could not %s %s: %s; trying again",
                    verdict.action.value,
                    delivery.message_id,
                    redact(str(exc))[:300],
                    extra={
                        "event": "worker.settle_retry",
                        "message_id": delivery.message_id,
                        "error_type": type(exc).__name__,
                    },
                )
            time.sleep(pause * (0.5 + random.random() / 2))
            pause = min(2.0, pause * 2)

    def settle(self, delivery: Delivery, outcome: Outcome) -> None:
        """Deprecated: settle ``outcome`` on :attr:`queue` (use :meth:`decide` and a host's
        way of applying the :class:`Verdict`)."""
        verdict = verdict_for(outcome, in_progress_retries=self.in_progress_retries)
        self._settle_on(self.queue, delivery, capped(verdict, delivery))

    def _reject(self, delivery: Delivery, reason: str, detail: str) -> Verdict:
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
        return Verdict.dead_letter(reason, detail)

    def poll(self, *, max_messages: int = 1, wait: float = 1.0) -> int:
        """Receive and handle up to ``max_messages``; returns how many were handled."""
        deliveries = self.queue.receive(max_messages, visibility=self.visibility, wait=wait)
        following: Delivery | None = None
        try:
            for i, delivery in enumerate(deliveries):
                following = deliveries[i + 1] if i + 1 < len(deliveries) else None
                self.handle(delivery, then=following)
        except BaseException:
            self.release(following)
            raise
        return len(deliveries)

    def release(self, following: Delivery | None) -> None:
        """After a batch broke off: give back the claim the last completion made for
        ``following`` (the delivery that was to be handled next), and make that delivery
        visible again at once, so its window runs now rather than a visibility timeout later
        (best effort: it comes back when its visibility runs out anyway)."""
        if self.engine.release_handed() is None or following is None or self._queue is None:
            return
        try:
            self._queue.retry(following, 0.0)
        except Exception as exc:
            wlog.warning(
                "could not hand %s back to the queue: %s; it comes back when its visibility "
                "runs out",
                following.message_id,
                redact(str(exc))[:300],
                extra={"event": "worker.release_failed", "message_id": following.message_id},
            )

    def serve(self, stop: threading.Event, *, wait: float = 1.0, max_messages: int = 1) -> None:
        """Handle deliveries until ``stop`` is set, up to ``max_messages`` per receive (more
        than one: a batch of one job's windows costs one commit per run, see
        :meth:`Engine.execute`'s ``then``; the batch's later deliveries wait their turn)."""
        while not stop.is_set():
            try:
                self.poll(max_messages=max_messages, wait=wait)
            except Exception as exc:  # broker hiccup: log, back off, keep serving
                wlog.error(
                    "receive failed: %s",
                    redact(str(exc)),
                    extra={"event": "worker.error", "error_type": type(exc).__name__},
                )
                stop.wait(1.0)


__all__ = [
    "MAX_POSTPONEMENTS",
    "POSTPONED_ATTRIBUTE",
    "Decision",
    "OutcomeKind",
    "Trigger",
    "WindowRefused",
    "Worker",
    "check_window",
    "lease_visibility",
    "request_attributes",
]
