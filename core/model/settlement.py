"""What one delivery came to, and settlement as a value: the engine's :class:`Outcome` of a run,
and the :class:`Verdict` the worker decides once from it, which each host applies.

A :class:`Verdict` is what :class:`~cronwarden.hosting.trigger.Worker` returns for one delivery. A
pull
consumer maps it to broker calls, the GCP push function to an HTTP status (plus the publishes it
needs), the Azure function to its message actions. No host decides settlement by itself.

:class:`Outcome` and :class:`OutcomeKind` live here, beside their one reader, so that the run
layer produces them and every layer above consumes them without a cycle
(``cronwarden.run.engine`` re-exports them).

:func:`verdict_for` is the one mapping from an engine outcome to a verdict; :func:`settle_on`
applies a verdict through a pull consumer; :func:`republish` is the publishing half of a
POSTPONE that every host shares.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .logs import get_logger
from .ports import Delivery, Queue
from .redaction import redact

log = get_logger("worker")


class Settle(enum.StrEnum):
    ACK = "ack"
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"


class OutcomeKind(enum.StrEnum):
    SUCCEEDED = "succeeded"
    DUPLICATE = "duplicate"  #: the run key already finished (succeeded / dead-lettered)
    IN_PROGRESS = "in_progress"  #: another live owner runs this very run key: look again later
    SKIPPED = "skipped"  #: overlap policy skip: another run of the job holds the lock
    DEFERRED = "deferred"  #: overlap policy defer: try again later
    OVERLAP_FAILED = "overlap_failed"  #: overlap policy fail
    FAILED = "failed"  #: handler failed, attempts left: retry after ``delay``
    DEAD_LETTERED = "dead_lettered"  #: attempts exhausted or permanent error
    LEASE_LOST = "lease_lost"  #: another owner took the run over; this one wrote nothing more
    REJECTED = "rejected"  #: the request itself is wrong (payload mismatch): dead-letter it

    @property
    def settle(self) -> Settle:
        """Deprecated: the policy is :func:`verdict_for`; this is its
        action folded onto the old three values (a postponement was a retry)."""
        action = verdict_for(Outcome(self, "")).action
        if action is Action.ACK:
            return Settle.ACK
        if action is Action.DEAD_LETTER:
            return Settle.DEAD_LETTER
        return Settle.RETRY


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    run_key: str
    run_id: str | None = None
    delay: float = 0.0  #: seconds before the retry, when ``kind.settle`` is RETRY
    reason: str = ""  #: machine-readable reason (dead-letter reason, skip reason)
    detail: str = ""  #: redacted human text
    counters: dict[str, int] = field(default_factory=dict)
    #: a DEAD_LETTERED outcome of a run found dead-lettered already (``AlreadyDeadLettered``):
    #: the reason it was first dead-lettered with, which its letter carries again
    dead_letter_reason: str = ""

    @property
    def settle(self) -> Settle:
        return self.kind.settle


class Action(enum.StrEnum):
    ACK = "ack"  #: done with this delivery: remove it
    RETRY = "retry"  #: a failed attempt: deliver again after ``delay`` (uses up an attempt)
    POSTPONE = "postpone"  #: not this worker's turn (lock held, run in progress): look again
    #: after ``delay`` without spending a delivery attempt (re-published as a fresh message)
    DEAD_LETTER = "dead_letter"  #: move to the dead-letter queue with ``reason`` / ``detail``


@dataclass(frozen=True)
class Verdict:
    """How to settle one delivery. ``delay`` is in seconds (RETRY / POSTPONE only)."""

    action: Action
    delay: float = 0.0
    reason: str = ""
    detail: str = ""

    @classmethod
    def ack(cls, reason: str = "") -> Verdict:
        return cls(Action.ACK, reason=reason)

    @classmethod
    def retry(cls, delay: float, reason: str = "", detail: str = "") -> Verdict:
        return cls(Action.RETRY, delay=max(0.0, delay), reason=reason, detail=detail)

    @classmethod
    def postpone(cls, delay: float, reason: str = "", detail: str = "") -> Verdict:
        return cls(Action.POSTPONE, delay=max(0.0, delay), reason=reason, detail=detail)

    @classmethod
    def dead_letter(cls, reason: str, detail: str = "") -> Verdict:
        return cls(Action.DEAD_LETTER, reason=reason, detail=detail)


# -- deciding: one outcome → one verdict ---------------------------------------------------------

POSTPONED_ATTRIBUTE = "cw-postponed"  #: how many times a request was put back without running
MAX_POSTPONEMENTS = 1000  #: then the broker's own retry (counted, bounded) takes over


def verdict_for(outcome: Outcome, *, in_progress_retries: bool = False) -> Verdict:
    """The one mapping from an engine outcome to a verdict.

    * ``deferred`` / ``in_progress``: POSTPONE (the request has not run; looking again must not
      spend a delivery attempt). With ``in_progress_retries`` (a push host) ``in_progress`` is a
      RETRY after 0 s instead: a push redelivered while its run is still going means the owner's
      own push has timed out, so this delivery must stay to carry the run, and a delayed copy
      would only be pushed early and bounced until due.
    * ``failed`` / ``lease_lost``: RETRY after the outcome's delay (a counted attempt).
    * ``dead_lettered`` / ``rejected``: DEAD_LETTER with the outcome's reason and detail (for
      a run found dead-lettered already, the reason it was first dead-lettered with: a letter
      sent again carries the true first reason, whatever became of the first call).
    * everything else (succeeded, duplicate, skipped, overlap_failed): ACK.
    """

    kind = outcome.kind
    if kind is OutcomeKind.IN_PROGRESS and in_progress_retries:
        return Verdict.retry(0.0, reason=kind.value, detail=outcome.detail)
    if kind in (OutcomeKind.DEFERRED, OutcomeKind.IN_PROGRESS):
        return Verdict.postpone(outcome.delay, reason=kind.value, detail=outcome.detail)
    if kind in (OutcomeKind.FAILED, OutcomeKind.LEASE_LOST):
        reason = outcome.reason or kind.value
        return Verdict.retry(outcome.delay, reason=reason, detail=outcome.detail)
    if kind in (OutcomeKind.DEAD_LETTERED, OutcomeKind.REJECTED):
        return Verdict.dead_letter(outcome.dead_letter_reason or outcome.reason, outcome.detail)
    return Verdict.ack(kind.value)


def postponements(delivery: Delivery) -> int:
    """How many times this request was postponed before (``cw-postponed``; 0 if unreadable)."""
    try:
        return max(0, int(delivery.attributes.get(POSTPONED_ATTRIBUTE, "0")))
    except ValueError:
        return 0


def capped(verdict: Verdict, delivery: Delivery) -> Verdict:
    """A POSTPONE past :data:`MAX_POSTPONEMENTS` becomes a RETRY: the broker's own retry is
    counted and bounded, so a request can not be put back forever."""
    if verdict.action is Action.POSTPONE and postponements(delivery) >= MAX_POSTPONEMENTS:
        return Verdict.retry(verdict.delay, verdict.reason, verdict.detail)
    return verdict


# -- applying: what every host shares -----------------------------------------------------------


class Publishes(Protocol):
    """Anything with :meth:`~cronwarden.model.ports.Publisher.publish` (a queue, a topic client)."""

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None: ...


def republish(publisher: Publishes, delivery: Delivery, delay: float) -> bool:
    """Apply the publishing half of a POSTPONE: put the request back as a fresh message (its
    ``cw-postponed`` count + 1) due after ``delay``; the caller then removes this delivery.

    A broker retry would count a delivery attempt, and a catch-up window queued behind a few
    long runs would be dead-lettered (max deliveries) without ever having failed. A copy that
    lands twice is harmless: the claim dedupes. False (the caller falls back to a RETRY) when
    the publish fails."""
    attributes = {**delivery.attributes, POSTPONED_ATTRIBUTE: str(postponements(delivery) + 1)}
    try:
        publisher.publish(delivery.body, attributes=attributes, delay=max(0.0, delay))
    except Exception as exc:  # broker hiccup: fall back to the broker's retry
        log.warning(
            "could not re-enqueue %s: %s; retrying it instead",
            delivery.message_id,
            redact(str(exc)),
            extra={"event": "worker.error", "error_type": type(exc).__name__},
        )
        return False
    return True


def settle_on(queue: Queue, delivery: Delivery, verdict: Verdict) -> None:
    """Apply ``verdict`` through a pull consumer's broker calls (local SQLite queue, Pub/Sub
    pull, Service Bus receiver): a POSTPONE is a :func:`republish` then an ack (a RETRY if the
    publish fails)."""
    action = verdict.action
    if action is Action.POSTPONE:
        if republish(queue, delivery, verdict.delay):
            queue.ack(delivery)
        else:
            queue.retry(delivery, delay=verdict.delay)
    elif action is Action.ACK:
        queue.ack(delivery)
    elif action is Action.RETRY:
        queue.retry(delivery, delay=verdict.delay)
    else:
        queue.dead_letter(delivery, verdict.reason, verdict.detail)
