"""Pub/Sub *push* deliveries: parsing the push envelope, and settling through the HTTP status.

A push subscription POSTs each message to the worker as JSON::

    {"message": {"data": "<base64>", "attributes": {...}, "messageId": "...",
                 "publishTime": "2026-01-20T02:00:01.123Z"},
     "subscription": "projects/P/subscriptions/S", "deliveryAttempt": 3}

(``deliveryAttempt`` only in production and only with a dead-letter policy; the emulator and
functions-framework's CloudEvent conversion drop it, so the attempt count of record is the run
record's.) :func:`parse_envelope` turns the body into a :class:`~cronwarden.ports.Delivery`
whose ``handle`` is a :class:`PushReceipt`.

A push subscriber has no ack / nack / dead-letter call: the HTTP status settles the message.
:class:`PushQueue` is the :class:`~cronwarden.ports.Queue` a core :class:`~cronwarden.Worker`
settles through, so the worker's parse / execute / settle logic is reused unchanged:

=================  ========================================================================
``ack``            receipt status 204: Pub/Sub drops the message
``retry(delay)``   receipt status 503: Pub/Sub redelivers after the subscription's
                   retryPolicy backoff (``delay`` is advisory: push cannot choose it)
``dead_letter``    publish to the dead-letter topic with the reason attributes, then 204;
                   if that publish fails the status is 503 (redelivered, never dropped)
``extend``         nothing: a push delivery's deadline is the subscription's ackDeadline
                   (at most 600 s); runs longer than that need the pull worker
=================  ========================================================================
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
from typing import Any

from cronwarden.logs import get_logger
from cronwarden.ports import DeadLetter, Delivery, Queue
from cronwarden.redaction import redact

from .queue import NOT_BEFORE_ATTRIBUTE, PubSubQueue

log = get_logger("worker")

ACK_STATUS = 204  #: any 2xx acknowledges a push
RETRY_STATUS = 503  #: any other status is redelivered after the retryPolicy backoff
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024  #: larger than any Pub/Sub message (10 MB, base64)


class MalformedEnvelope(ValueError):
    """The request body is not a Pub/Sub push envelope (no message to settle or dead-letter)."""


@dataclass
class PushReceipt:
    """How one push delivery was settled: the HTTP status to answer with, and why."""

    status: int | None = None
    verdict: str = ""  #: ack | retry | dead_letter
    delay: float = 0.0  #: the engine's wish for the retry delay (advisory on push)
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


def receipt_of(delivery: Delivery) -> PushReceipt:
    handle = delivery.handle
    if not isinstance(handle, PushReceipt):
        raise TypeError("not a push delivery (parse it with parse_envelope)")
    return handle


class PushQueue(Queue):
    """The :class:`~cronwarden.ports.Queue` a core ``Worker`` settles push deliveries through.

    Settling records the HTTP status on the delivery's :class:`PushReceipt` (thread-safe: one
    instance serves concurrent requests). Publishing, dead letters and the DLQ calls go to
    ``inner``, the :class:`PubSubQueue` of the same topic.
    """

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

    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        raise NotImplementedError("push deliveries arrive over HTTP; there is nothing to pull")

    def ack(self, delivery: Delivery) -> None:
        receipt_of(delivery).settle(ACK_STATUS, "ack")

    def retry(self, delivery: Delivery, delay: float) -> None:
        receipt_of(delivery).settle(RETRY_STATUS, "retry", delay=delay)

    def extend(self, delivery: Delivery, visibility: float) -> None:
        """Nothing to do: the subscription's ackDeadline (≤ 600 s) bounds a push delivery."""

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        receipt = receipt_of(delivery)
        try:
            self.inner.publish_dead_letter(delivery, reason, description)
        except Exception as exc:  # never drop: let Pub/Sub redeliver (and dead-letter) it
            log.error(
                "could not publish %s to the dead-letter topic: %s; it will be redelivered",
                delivery.message_id,
                redact(f"{type(exc).__name__}: {exc}"),
                extra={"event": "worker.error", "message_id": delivery.message_id},
            )
            receipt.settle(RETRY_STATUS, "retry", reason=reason)
            return
        receipt.settle(ACK_STATUS, "dead_letter", reason=reason)

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
    "MalformedEnvelope",
    "PushQueue",
    "PushReceipt",
    "not_before",
    "parse_envelope",
    "receipt_of",
]
