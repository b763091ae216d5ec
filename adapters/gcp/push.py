"""Pub/Sub *push* deliveries: parsing the push envelope, and settling through the HTTP status.

A push subscription POSTs each message to the worker as JSON::

    {"message": {"data": "<base64>", "attributes": {...}, "messageId": "...",
                 "publishTime": "2026-01-20T02:00:01.123Z"},
     "subscription": "projects/P/subscriptions/S", "deliveryAttempt": 3}

(``deliveryAttempt`` only in production and only with a dead-letter policy; the emulator and
functions-framework's CloudEvent conversion drop it, so the attempt count of record is the run
record's.) :func:`parse_envelope` turns the body into a :class:`~cronwarden.model.ports.Delivery`
whose ``handle`` is a :class:`PushReceipt`.

A push subscriber has no ack / nack / dead-letter call: the HTTP status settles the message.
:func:`push_reply` applies the worker's :class:`~cronwarden.model.settlement.Verdict`:

=================  ========================================================================
ACK                status 204: Pub/Sub drops the message
POSTPONE           publish a fresh copy (not counted as a delivery attempt), then 204; if
                   that publish fails, 503
RETRY              status 503: Pub/Sub redelivers after the subscription's retryPolicy
                   backoff (the verdict's delay is advisory: push cannot choose it)
DEAD_LETTER        publish to the dead-letter topic with the reason attributes, then 204;
                   if that publish fails the status is 503 (redelivered, never dropped)
=================  ========================================================================

There is no lease extension on push: a push delivery's deadline is the subscription's
ackDeadline (at most 600 s); runs longer than that need the pull worker.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from cronwarden.model.logs import get_logger
from cronwarden.model.ports import DeadLetter, Delivery
from cronwarden.model.redaction import redact
from cronwarden.model.settlement import Action, Verdict, republish

from .queue import NOT_BEFORE_ATTRIBUTE, PubSubQueue

log = get_logger("worker")

ACK_STATUS = 204  #: any 2xx acknowledges a push
RETRY_STATUS = 503  #: any other status is redelivered after the retryPolicy backoff
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024  #: larger than any Pub/Sub message (10 MB, base64)


class MalformedEnvelope(ValueError):
    """The request body is not a Pub/Sub push envelope (no message to settle or dead-letter)."""


class DeadLetterPublisher(Protocol):
    """What applying a push verdict needs from the topic's queue (a :class:`PubSubQueue`)."""

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None: ...

    def publish_dead_letter(
        self, delivery: Delivery, reason: str, description: str = ""
    ) -> None: ...


@dataclass(frozen=True)
class PushReply:
    """How one push delivery is answered: the HTTP status, and what it means."""

    status: int
    verdict: str  #: ack | postpone | retry | dead_letter
    reason: str = ""  #: the dead-letter reason
    delay: float = 0.0  #: the worker's wish for the retry delay (advisory on push)


@dataclass
class PushReceipt:
    """The push-specific part of a delivery (``Delivery.handle``): where it came from.

    ``status`` … ``reason`` are kept for the deprecated :class:`PushQueue` shim only; hosts use
    the :class:`PushReply` that :func:`push_reply` returns."""

    status: int | None = None
    verdict: str = ""  #: ack | retry | dead_letter
    delay: float = 0.0
    reason: str = ""
    subscription: str = ""
    publish_time: datetime | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def settle(self, status: int, verdict: str, *, delay: float = 0.0, reason: str = "") -> None:
        with self.lock:
            if self.status is None:  # the first settlement wins, as on a broker
                self.status, self.verdict, self.delay, self.reason = status, verdict, delay, reason


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    # RFC 3339 with up to nanoseconds and a "Z"; Python takes at most microseconds.
    head, dot, tail = text.replace("Z", "+00:00").partition(".")
    if dot:
        digits = tail[: len(tail) - len(tail.lstrip("0123456789"))]
        zone = tail[len(digits) :]
        head = f"{head}.{(digits + '000000')[:6]}{zone}"
    try:
        when = datetime.fromisoformat(head)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def parse_envelope(body: bytes | str | Mapping[str, Any]) -> Delivery:
    """The push envelope as a delivery (``handle`` = a fresh :class:`PushReceipt`).

    Raises :class:`MalformedEnvelope` when ``body`` is not an envelope at all. A well-formed
    envelope carrying a bad run request is *not* malformed here: the worker dead-letters it.
    """
    if isinstance(body, Mapping):
        envelope: Any = body
    else:
        if len(body) > MAX_ENVELOPE_BYTES:
            raise MalformedEnvelope("push body is too large")
        try:
            envelope = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MalformedEnvelope(f"push body is not JSON: {exc}") from None
    if not isinstance(envelope, Mapping) or not isinstance(envelope.get("message"), Mapping):
        raise MalformedEnvelope("push body has no 'message' object")
    message = envelope["message"]
    raw = message.get("data") or ""
    if not isinstance(raw, str):
        raise MalformedEnvelope("message.data must be base64 text")
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedEnvelope("message.data is not valid base64") from None
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in attributes.items()
    ):
        raise MalformedEnvelope("message.attributes must map text to text")
    message_id = message.get("messageId") or message.get("message_id") or ""
    if not isinstance(message_id, str) or not message_id:
        raise MalformedEnvelope("message has no messageId")
    published = _parse_time(message.get("publishTime") or message.get("publish_time"))
    attempt = envelope.get("deliveryAttempt")
    subscription = envelope.get("subscription")
    receipt = PushReceipt(
        subscription=subscription if isinstance(subscription, str) else "",
        publish_time=published,
    )
    return Delivery(
        message_id=message_id,
        body=data,
        attributes=dict(attributes),
        attempt=attempt if isinstance(attempt, int) and attempt > 0 else 1,
        handle=receipt,
        enqueued_at=published,
    )


def not_before(delivery: Delivery) -> float:
    """Seconds until a delayed message (``cw-not-before``) is due; 0 when it is due now."""
    try:
        due = float(delivery.attributes.get(NOT_BEFORE_ATTRIBUTE, "0"))
    except ValueError:
        return 0.0
    return max(0.0, due - time.time())


def push_reply(verdict: Verdict, delivery: Delivery, topic: DeadLetterPublisher) -> PushReply:
    """Apply ``verdict`` to a push delivery: the publishes it needs on ``topic``, and the
    status to answer with (see the module docs). Never drops a message: a publish that fails
    turns into a 503."""
    action = verdict.action
    if action is Action.ACK:
        return PushReply(ACK_STATUS, "ack")
    if action is Action.POSTPONE:
        if republish(topic, delivery, verdict.delay):
            return PushReply(ACK_STATUS, "postpone", delay=verdict.delay)
        return PushReply(RETRY_STATUS, "retry", delay=verdict.delay)
    if action is Action.RETRY:
        return PushReply(RETRY_STATUS, "retry", delay=verdict.delay)
    try:
        topic.publish_dead_letter(delivery, verdict.reason, verdict.detail)
    except Exception as exc:  # never drop: let Pub/Sub redeliver (and dead-letter) it
        log.error(
            "could not publish %s to the dead-letter topic: %s; it will be redelivered",
            delivery.message_id,
            redact(f"{type(exc).__name__}: {exc}"),
            extra={"event": "worker.error", "message_id": delivery.message_id},
        )
        return PushReply(RETRY_STATUS, "retry", reason=verdict.reason)
    return PushReply(ACK_STATUS, "dead_letter", reason=verdict.reason)


def receipt_of(delivery: Delivery) -> PushReceipt:
    """Deprecated: the :class:`PushReceipt` of a push delivery (its ``handle``)."""
    handle = delivery.handle
    if not isinstance(handle, PushReceipt):
        raise TypeError("not a push delivery (parse it with parse_envelope)")
    return handle


class PushQueue:
    """Deprecated shim (not a :class:`~cronwarden.model.ports.Queue`): records :func:`push_reply`'s
    answer on each delivery's :class:`PushReceipt`. Hosts call :func:`push_reply` directly."""

    def __init__(self, inner: PubSubQueue) -> None:
        self.inner = inner

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        self.inner.publish(body, attributes=attributes, dedup_id=dedup_id, delay=delay)

    def _apply(self, delivery: Delivery, verdict: Verdict) -> None:
        receipt = receipt_of(delivery)
        reply = push_reply(verdict, delivery, self.inner)
        receipt.settle(reply.status, reply.verdict, delay=reply.delay, reason=reply.reason)

    def ack(self, delivery: Delivery) -> None:
        self._apply(delivery, Verdict.ack())

    def retry(self, delivery: Delivery, delay: float) -> None:
        self._apply(delivery, Verdict.retry(delay))

    def extend(self, delivery: Delivery, visibility: float) -> None:
        """Nothing to do: the subscription's ackDeadline (≤ 600 s) bounds a push delivery."""

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        self._apply(delivery, Verdict.dead_letter(reason, description))

    def dlq_depth(self) -> int:
        return self.inner.dlq_depth()

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        return self.inner.dlq_peek(limit)

    def redrive(self, limit: int = 10) -> int:
        return self.inner.redrive(limit)

    def close(self) -> None:
        self.inner.close()


__all__ = [
    "ACK_STATUS",
    "RETRY_STATUS",
    "DeadLetterPublisher",
    "MalformedEnvelope",
    "PushQueue",
    "PushReceipt",
    "PushReply",
    "not_before",
    "parse_envelope",
    "push_reply",
    "receipt_of",
]
