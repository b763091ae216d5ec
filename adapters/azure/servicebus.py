"""The Service Bus queue: run requests on an Azure Service Bus queue (or our emulator).

Contract (``cronwarden.model.ports.Queue``) and how Service Bus carries it:

* ``publish(dedup_id=run key)`` sends with ``MessageId`` = the run key; the queue's duplicate
  detection (``RequiresDuplicateDetection``, the rendered queue has it) drops a double fire.
  ``delay`` schedules the message (``ScheduledEnqueueTimeUtc``).
* ``receive`` is peek-lock. The broker's lock lasts the queue's ``LockDuration`` (at most 5 min
  on Azure); a background keeper renews the locks of unsettled deliveries until their
  ``visibility`` runs out, and ``extend`` (the engine's lease renewals) pushes that deadline
  out and renews at once. A worker that dies stops renewing: the lock expires and the broker
  redelivers with ``delivery_count`` + 1.
* ``ack`` completes; ``dead_letter`` dead-letters with ``DeadLetterReason`` /
  ``DeadLetterErrorDescription``.
* ``retry(delay)``: Service Bus redelivers at once on abandon, so a retry **schedules a copy**
  at now + delay that carries the attempts used so far (application property
  ``cw-attempt-base``) and then completes the original. The two steps are not atomic (Service
  Bus transactions need the same entity and connection mode the SDK exposes only partially);
  if the process dies between them the original comes back after its lock expires *and* the
  copy arrives: two deliveries of one run key, which the store's claim dedupes. The copy's
  ``MessageId`` is derived from the original and the retry generation, so retrying the
  redelivered original again is dropped by duplicate detection. When the attempts reach
  ``max_deliveries`` the message is dead-lettered with ``MaxDeliveryCountExceeded`` instead.
* ``Delivery.attempt`` counts from 1 across broker redeliveries and scheduled copies:
  ``cw-attempt-base + delivery_count + 1`` (the AMQP header counts *failed* deliveries, 0 first).
* The DLQ is ``<queue>/$DeadLetterQueue``: ``dlq_depth`` counts by peeking (Service Bus has no
  count over AMQP; the metric/administration API is not reachable with data-plane rights
  alone), ``dlq_peek`` peeks, ``redrive(limit)`` receives at most ``limit`` dead letters, sends
  each back with :data:`~cronwarden.model.ports.REDRIVE_ATTRIBUTE` incremented and a fresh attempt
  budget, then completes the dead letter (same non-atomic window: a crash may redrive twice;
  the run record dedupes).

The SDK client, sender and receivers are created on first use and reused; ``close`` closes
them. Connection strings never appear in logs or errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from cronwarden.model.logs import get_logger
from cronwarden.model.ports import (
    REASON_ATTRIBUTE,
    REDRIVE_ATTRIBUTE,
    DeadLetter,
    Delivery,
    Queue,
    QueueCapabilities,
)
from cronwarden.model.settlement import Action, Verdict

from ._redact import redact

if TYPE_CHECKING:
    from cronwarden.ops.doctor import DeadLetterPolicy

log = get_logger("azure.servicebus")

ATTEMPT_BASE = "cw-attempt-base"  #: attempts used by earlier copies of this run request
RETRY_GENERATION = "cw-retry"  #: how many scheduled re-enqueues led to this copy
ORIGIN_ID = "cw-origin-id"  #: MessageId of the first copy
DESCRIPTION_ATTRIBUTE = "cw-dead-letter-description"
_INTERNAL = (ATTEMPT_BASE, RETRY_GENERATION, ORIGIN_ID)
MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"
_DLQ_PEEK_PAGE = 250
_DLQ_COUNT_CAP = 100_000


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _properties(message: Any) -> dict[str, str]:
    raw = getattr(message, "application_properties", None) or {}
    return {_text(k): _text(v) for k, v in raw.items()}


def _body(message: Any) -> bytes:
    body = message.body
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    return b"".join(bytes(part) for part in body)


def _int(value: Any, default: int = 0) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return default


def attempt_of(properties: Mapping[str, str], delivery_count: int) -> int:
    """The attempt number (from 1) of a delivery: earlier copies' attempts + this copy's."""
    return _int(properties.get(ATTEMPT_BASE)) + max(0, delivery_count) + 1


def public_attributes(properties: Mapping[str, str]) -> dict[str, str]:
    """Application properties without the adapter's bookkeeping."""
    return {k: v for k, v in properties.items() if k not in _INTERNAL}


class _Tracked:
    __slots__ = ("deadline", "message", "threshold")

    def __init__(self, message: Any, deadline: float, threshold: float) -> None:
        self.message = message
        self.deadline = deadline
        self.threshold = threshold  #: renew when fewer seconds than this are left on the lock


class ServiceBusQueue(Queue):
    """A :class:`~cronwarden.model.ports.Queue` on one Service Bus queue.

    Build with :meth:`from_connection_string` (emulator, local development) or
    :meth:`from_namespace` (fully qualified namespace + token credential, e.g. a managed
    identity). ``max_deliveries`` must equal the queue's ``MaxDeliveryCount`` (the broker's
    backstop); ``deduplicates`` says whether the queue has duplicate detection on.
    """

    def __init__(
        self,
        client_factory: Any,
        queue_name: str,
        *,
        max_deliveries: int = 10,
        deduplicates: bool = True,
        renew_margin: float = 1.5,
    ) -> None:
        self._client_factory = client_factory
        self.queue_name = queue_name
        self.max_deliveries = max_deliveries
        self.deduplicates = deduplicates
        self.capabilities = QueueCapabilities(dedup=deduplicates, max_deliveries=max_deliveries)
        self.renew_margin = renew_margin
        self._client: Any = None
        self._sender: Any = None
        self._receiver: Any = None
        self._dlq: Any = None
        self._client_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._recv_lock = threading.RLock()
        self._dlq_lock = threading.Lock()
        self._tracked: dict[str, _Tracked] = {}
        self._tracked_lock = threading.Lock()
        self._keeper: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_connection_string(
        cls, connection_string: str, queue_name: str, **options: Any
    ) -> ServiceBusQueue:
        def factory() -> Any:
            from azure.servicebus import ServiceBusClient

            return ServiceBusClient.from_connection_string(connection_string)

        return cls(factory, queue_name, **options)

    @classmethod
    def from_namespace(
        cls, namespace: str, credential: Any, queue_name: str, **options: Any
    ) -> ServiceBusQueue:
        """``namespace`` is fully qualified (``<name>.servicebus.windows.net``)."""

        def factory() -> Any:
            from azure.servicebus import ServiceBusClient

            return ServiceBusClient(namespace, credential)

        return cls(factory, queue_name, **options)

    # -- SDK objects, created once ----------------------------------------------------------
    @property
    def client(self) -> Any:
        with self._client_lock:
            if self._closed:
                raise RuntimeError("the Service Bus queue is closed")
            if self._client is None:
                self._client = self._client_factory()
            return self._client

    def _get_sender(self) -> Any:
        if self._sender is None:
            self._sender = self.client.get_queue_sender(self.queue_name)
        return self._sender

    def _get_receiver(self) -> Any:
        if self._receiver is None:
            receiver = self.client.get_queue_receiver(self.queue_name, prefetch_count=0)
            # Open the link now: the first receive's short max_wait_time would also bound the
            # link's opening (CBS token + attach) and time out.
            receiver.__enter__()
            self._receiver = receiver
        return self._receiver

    def _get_dlq(self) -> Any:
        if self._dlq is None:
            from azure.servicebus import ServiceBusSubQueue

            receiver = self.client.get_queue_receiver(
                self.queue_name, sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=0
            )
            receiver.__enter__()
            self._dlq = receiver
        return self._dlq

    # -- sending ----------------------------------------------------------------------------
    def _message(self, body: bytes, properties: Mapping[str, str], message_id: str | None) -> Any:
        from azure.servicebus import ServiceBusMessage

        props: dict[str | bytes, Any] = {k: v for k, v in properties.items()}
        return ServiceBusMessage(body, application_properties=props or None, message_id=message_id)

    def send(
        self,
        body: bytes,
        properties: Mapping[str, str],
        *,
        message_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        """Send one message (scheduled ``delay`` seconds ahead when positive)."""
        message = self._message(body, properties, message_id)
        with self._send_lock:
            sender = self._get_sender()
            if delay > 0:
                when = datetime.now(UTC) + timedelta(seconds=delay)
                sender.schedule_messages(message, when)
            else:
                sender.send_messages(message)

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        self.send(body, dict(attributes or {}), message_id=dedup_id, delay=delay)

    def retry_copy(self, delivery: Delivery, delay: float) -> bool:
        """Schedule the copy that carries ``delivery`` to its next attempt; False when the
        attempts are used up (the caller dead-letters instead)."""
        if delivery.attempt >= self.max_deliveries:
            return False
        props = dict(delivery.attributes)
        origin = _origin(delivery)
        generation = _int(_hidden(delivery).get(RETRY_GENERATION)) + 1
        props.update(
            {
                ATTEMPT_BASE: str(delivery.attempt),
                RETRY_GENERATION: str(generation),
                ORIGIN_ID: origin,
            }
        )
        self.send(
            delivery.body, props, message_id=f"{origin}~retry{generation}", delay=max(0.0, delay)
        )
        return True

    # -- receiving --------------------------------------------------------------------------
    def delivery_of(self, message: Any) -> Delivery:
        return self.delivery_of_message(message)

    @staticmethod
    def delivery_of_message(message: Any) -> Delivery:
        """The :class:`Delivery` of an SDK ``ServiceBusReceivedMessage`` (AMQP count, 0 first)."""
        props = _properties(message)
        count = int(message.delivery_count or 0)
        delivery = Delivery(
            message_id=str(message.message_id or ""),
            body=_body(message),
            attributes=public_attributes(props),
            attempt=attempt_of(props, count),
            handle=message,
            enqueued_at=message.enqueued_time_utc,
        )
        delivery.__dict__["_hidden"] = {k: v for k, v in props.items() if k in _INTERNAL}
        return delivery

    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        end = time.monotonic() + max(0.0, wait)
        out: list[Delivery] = []
        while True:
            chunk = min(1.0, max(0.2, end - time.monotonic()))
            with self._recv_lock:
                messages = self._get_receiver().receive_messages(
                    max_message_count=max_messages - len(out), max_wait_time=chunk
                )
            now = datetime.now(UTC)
            for message in messages:
                locked = message.locked_until_utc
                if locked is not None and locked <= now:
                    continue  # sat in the SDK buffer past its lock: the broker redelivers it
                delivery = self.delivery_of(message)
                if delivery.attempt > self.max_deliveries:
                    self._dead_letter_message(
                        message,
                        MAX_DELIVERY_REASON,
                        f"{delivery.attempt - 1} attempts (limit {self.max_deliveries})",
                    )
                    continue
                self._track(delivery, visibility)
                out.append(delivery)
            if out or time.monotonic() >= end:
                return out

    # -- settling ---------------------------------------------------------------------------
    def ack(self, delivery: Delivery) -> None:
        self._untrack(delivery)
        with self._recv_lock:
            self._get_receiver().complete_message(delivery.handle)

    def abandon(self, delivery: Delivery) -> None:
        """Hand the message back at once (the broker counts a delivery)."""
        self._untrack(delivery)
        with self._recv_lock:
            self._get_receiver().abandon_message(delivery.handle)

    def retry(self, delivery: Delivery, delay: float) -> None:
        then = retry_by_copy(self, delivery, delay)
        if then.action is Action.ACK:
            self.ack(delivery)
        else:
            self.dead_letter(delivery, then.reason, then.detail)

    def extend(self, delivery: Delivery, visibility: float) -> None:
        with self._tracked_lock:
            tracked = self._tracked.get(_token(delivery))
            if tracked is not None:
                tracked.deadline = max(tracked.deadline, time.monotonic() + visibility)
        with self._recv_lock:
            self._get_receiver().renew_message_lock(delivery.handle)

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        self._untrack(delivery)
        self._dead_letter_message(delivery.handle, reason, description)

    def _dead_letter_message(self, message: Any, reason: str, description: str) -> None:
        with self._recv_lock:
            self._get_receiver().dead_letter_message(
                message, reason=reason[:4096], error_description=description[:4096]
            )

    # -- lock keeping -----------------------------------------------------------------------
    def _track(self, delivery: Delivery, visibility: float) -> None:
        locked = getattr(delivery.handle, "locked_until_utc", None)
        span = (locked - datetime.now(UTC)).total_seconds() if locked is not None else 0.0
        # Renew at half the lock duration (never later than renew_margin before expiry): a
        # renewal may wait up to a second behind a receive call on the shared link.
        threshold = max(self.renew_margin, span / 2)
        with self._tracked_lock:
            self._tracked[_token(delivery)] = _Tracked(
                delivery.handle, time.monotonic() + visibility, threshold
            )
            if self._keeper is None:
                self._keeper = threading.Thread(
                    target=self._keep, name="cronwarden-servicebus-locks", daemon=True
                )
                self._keeper.start()

    def _untrack(self, delivery: Delivery) -> None:
        with self._tracked_lock:
            self._tracked.pop(_token(delivery), None)

    def _keep(self) -> None:
        """Renew locks that would expire before their delivery's visibility deadline."""
        while not self._stop.wait(0.2):
            now_mono = time.monotonic()
            now = datetime.now(UTC)
            with self._tracked_lock:
                items = list(self._tracked.items())
            for token, tracked in items:
                if now_mono >= tracked.deadline:
                    with self._tracked_lock:
                        self._tracked.pop(token, None)
                    continue
                locked = tracked.message.locked_until_utc
                if locked is None:
                    continue
                left = (locked - now).total_seconds()
                if left <= 0:
                    with self._tracked_lock:
                        self._tracked.pop(token, None)
                    continue
                if left > tracked.threshold or now_mono + left >= tracked.deadline:
                    continue  # not yet, or the lock outlives the visibility anyway
                try:
                    with self._recv_lock:
                        self._get_receiver().renew_message_lock(tracked.message)
                except Exception as exc:  # lock lost: the broker redelivers; the run record rules
                    log.warning(
                        "could not renew the lock of message %s: %s",
                        getattr(tracked.message, "message_id", "?"),
                        redact(str(exc)),
                        extra={"event": "queue.renew_failed"},
                    )
                    with self._tracked_lock:
                        self._tracked.pop(token, None)

    # -- dead letters -----------------------------------------------------------------------
    def _peek_dlq(self, limit: int) -> list[Any]:
        out: list[Any] = []
        sequence = 1
        with self._dlq_lock:
            receiver = self._get_dlq()
            while len(out) < limit:
                page = receiver.peek_messages(
                    max_message_count=min(_DLQ_PEEK_PAGE, limit - len(out)),
                    sequence_number=sequence,
                )
                if not page:
                    break
                out.extend(page)
                sequence = max(int(m.sequence_number) for m in page) + 1
        return out

    def dlq_depth(self) -> int:
        return len(self._peek_dlq(_DLQ_COUNT_CAP))

    def dead_letter_policy(self) -> DeadLetterPolicy:
        """For ``cronwarden doctor``: the broker's delivery limit, measured with a probe
        (``MaxDeliveryCount`` needs Manage rights to read; see :mod:`._dlq_probe`), and the
        lower of it and this adapter's ``max_deliveries`` (the adapter dead-letters too)."""
        from ._dlq_probe import measure_delivery_limit

        policy = measure_delivery_limit(self)
        if policy.max_deliveries is None:
            return policy
        return dataclasses.replace(
            policy, max_deliveries=min(policy.max_deliveries, self.max_deliveries)
        )

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        return [self.dead_letter_of(m) for m in self._peek_dlq(limit)]

    def dead_letter_of(self, message: Any) -> DeadLetter:
        props = _properties(message)
        reason = props.get(REASON_ATTRIBUTE) or _text(message.dead_letter_reason or "")
        description = props.get(DESCRIPTION_ATTRIBUTE) or _text(
            message.dead_letter_error_description or ""
        )
        attrs = {
            k: v
            for k, v in public_attributes(props).items()
            if k not in (REASON_ATTRIBUTE, DESCRIPTION_ATTRIBUTE)
            and k not in ("DeadLetterReason", "DeadLetterErrorDescription")
        }
        return DeadLetter(
            message_id=str(message.message_id or ""),
            body=_body(message),
            attributes=attrs,
            reason=reason,
            description=description,
            attempts=attempt_of(props, int(message.delivery_count or 0)) - 1,
            dead_lettered_at=message.enqueued_time_utc,
        )

    def redrive(self, limit: int = 10) -> int:
        moved = 0
        with self._dlq_lock:
            receiver = self._get_dlq()
            while moved < limit:
                batch = receiver.receive_messages(
                    max_message_count=min(100, limit - moved), max_wait_time=1.0
                )
                if not batch:
                    break
                for message in batch:
                    dead = self.dead_letter_of(message)
                    generation = _int(dead.attributes.get(REDRIVE_ATTRIBUTE)) + 1
                    props = {**dead.attributes, REDRIVE_ATTRIBUTE: str(generation)}
                    origin = _properties(message).get(ORIGIN_ID) or dead.message_id
                    props[ORIGIN_ID] = origin
                    self.send(dead.body, props, message_id=f"{origin}~redrive{generation}")
                    receiver.complete_message(message)
                    moved += 1
        log.info(
            "redrove %d dead letter(s) to %s",
            moved,
            self.queue_name,
            extra={"event": "dlq.redrive", "count": moved},
        )
        return moved

    def dlq_remove(self, message_ids: Sequence[str]) -> int:
        """Complete (remove) the dead letters with these message ids; every other letter
        received on the way is abandoned at once (back on the dead-letter queue)."""
        wanted = set(message_ids)
        removed = 0
        if not wanted:
            return 0
        with self._dlq_lock:
            receiver = self._get_dlq()
            seen: list[Any] = []
            while len(seen) < _DLQ_COUNT_CAP:
                batch = receiver.receive_messages(max_message_count=100, max_wait_time=1.0)
                if not batch:
                    break
                seen.extend(batch)
            for message in seen:
                if str(message.message_id or "") in wanted:
                    receiver.complete_message(message)
                    removed += 1
                else:
                    receiver.abandon_message(message)
        return removed

    def close(self) -> None:
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join(timeout=5)
        with self._client_lock:
            self._closed = True
            for obj in (self._receiver, self._dlq, self._sender, self._client):
                if obj is not None:
                    with contextlib.suppress(Exception):
                        obj.close()
            self._receiver = self._dlq = self._sender = self._client = None

    def __repr__(self) -> str:  # never shows credentials
        return f"ServiceBusQueue(queue={self.queue_name!r})"


class CopiesRetries(Protocol):
    """What :func:`retry_by_copy` needs (a :class:`ServiceBusQueue`)."""

    max_deliveries: int

    def retry_copy(self, delivery: Delivery, delay: float) -> bool: ...


def retry_by_copy(bus: CopiesRetries, delivery: Delivery, delay: float) -> Verdict:
    """Apply a RETRY on Service Bus (abandon would redeliver at once): schedule the copy that
    carries the next attempt, then settle the original as the returned verdict says: ACK
    (complete it), or, the attempts used up, DEAD_LETTER with ``MaxDeliveryCountExceeded``.
    Used by the pull receiver and by the Functions host's message actions alike."""
    if bus.retry_copy(delivery, delay):
        return Verdict.ack("retry")
    return Verdict.dead_letter(
        MAX_DELIVERY_REASON, f"{delivery.attempt} attempts (limit {bus.max_deliveries})"
    )


def _token(delivery: Delivery) -> str:
    return str(getattr(delivery.handle, "lock_token", "") or id(delivery.handle))


def _hidden(delivery: Delivery) -> dict[str, str]:
    hidden = delivery.__dict__.get("_hidden")
    return dict(hidden) if isinstance(hidden, dict) else {}


def _origin(delivery: Delivery) -> str:
    return _hidden(delivery).get(ORIGIN_ID) or delivery.message_id


__all__ = [
    "ATTEMPT_BASE",
    "MAX_DELIVERY_REASON",
    "ORIGIN_ID",
    "RETRY_GENERATION",
    "ServiceBusQueue",
    "attempt_of",
    "public_attributes",
]
