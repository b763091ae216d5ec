"""Settlement as a value: the worker decides once what happens to a delivery, each host applies it.

A :class:`Verdict` is what :class:`~cronwarden.trigger.Worker` returns for one delivery. A pull
consumer maps it to broker calls, the GCP push function to an HTTP status (plus the publishes it
needs), the Azure function to its message actions. No host decides settlement by itself.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


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
