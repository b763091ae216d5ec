"""An in-memory :class:`~cronwarden.model.ports.Queue`: publishing, consuming and dead letters."""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from cronwarden.model.ports import REDRIVE_ATTRIBUTE, DeadLetter, Delivery, Queue, QueueCapabilities

MAX_DELIVERIES_REASON = "MaxDeliveryCountExceeded"


@dataclass
class _Message:
    seq: int
    message_id: str
    body: bytes
    attributes: dict[str, str]
    enqueued_at: float
    visible_at: float
    deliveries: int = 0
    receipt: str | None = None
    reason: str = ""
    description: str = ""
    dead_lettered_at: float | None = None


class MemoryQueue(Queue):
    """A broker in a dict, with the semantics of the shipped ones (SQLite, Service Bus).

    * A receive hides a message for ``visibility`` seconds and stamps a fresh receipt; a
      settle with an older receipt (its visibility ran out, someone else holds it) is ignored.
    * After ``max_deliveries`` deliveries without settlement the queue dead-letters the
      message itself (reason ``MaxDeliveryCountExceeded``).
    * A repeated ``dedup_id`` within ``dedup_window`` seconds enqueues nothing.
    * ``redrive`` moves dead letters back with :data:`~cronwarden.model.ports.REDRIVE_ATTRIBUTE`
      incremented and the delivery count reset.

    ``clock`` (optional, e.g. a :class:`~cronwarden.testing.FakeClock`) decides visibility and
    delays, so a test can let a delay pass with ``clock.advance``; ``receive(wait=...)`` still
    waits in real time for a publish from another thread. Without it, real time is used.
    """

    def __init__(
        self,
        *,
        max_deliveries: int = 10,
        dedup_window: float = 600.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        self.max_deliveries = max_deliveries
        self.dedup_window = dedup_window
        self.deduplicates = True
        self.capabilities = QueueCapabilities(dedup=True, max_deliveries=max_deliveries)
        self._clock = clock
        self._messages: dict[int, _Message] = {}
        self._dead: dict[int, _Message] = {}
        self._dedup: dict[str, float] = {}
        self._seq = itertools.count(1)
        self._changed = threading.Condition()

    # -- time ---------------------------------------------------------------------------------
    def _now(self) -> float:
        return self._clock().timestamp() if self._clock is not None else time.time()

    # -- Publisher ----------------------------------------------------------------------------
    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        with self._changed:
            now = self._now()
            if dedup_id is not None:
                self._dedup = {k: t for k, t in self._dedup.items() if t >= now - self.dedup_window}
                if dedup_id in self._dedup:
                    return
                self._dedup[dedup_id] = now
            seq = next(self._seq)
            self._messages[seq] = _Message(
                seq=seq,
                message_id=dedup_id or secrets.token_hex(8),
                body=bytes(body),
                attributes=dict(attributes or {}),
                enqueued_at=now,
                visible_at=now + max(0.0, delay),
            )
            self._changed.notify_all()

    def pending(self) -> int:
        """Messages waiting or in flight (not dead-lettered); for assertions."""
        with self._changed:
            return len(self._messages)

    # -- Consumer -----------------------------------------------------------------------------
    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + max(0.0, wait)
        with self._changed:
            while True:
                found = self._receive_now(max_messages, visibility)
                remaining = deadline - time.monotonic()
                if found or remaining <= 0:
                    return found
                # Woken by a publish or settle; the short cap notices messages whose visibility
                # or delay runs out on its own.
                self._changed.wait(min(remaining, 0.05))

    def _receive_now(self, max_messages: int, visibility: float) -> list[Delivery]:
        now = self._now()
        ready = sorted(
            (m for m in self._messages.values() if m.visible_at <= now),
            key=lambda m: (m.visible_at, m.seq),
        )
        out: list[Delivery] = []
        for message in ready:
            if len(out) >= max_messages:
                break
            if message.deliveries >= self.max_deliveries:
                self._to_dead_letters(
                    message,
                    MAX_DELIVERIES_REASON,
                    f"not settled after {message.deliveries} deliveries",
                    now,
                )
                continue
            message.deliveries += 1
            message.visible_at = now + visibility
            message.receipt = secrets.token_hex(8)
            out.append(
                Delivery(
                    message_id=message.message_id,
                    body=message.body,
                    attributes=dict(message.attributes),
                    attempt=message.deliveries,
                    handle=(message.seq, message.receipt),
                    enqueued_at=datetime.fromtimestamp(message.enqueued_at, UTC),
                )
            )
        return out

    def _held(self, delivery: Delivery) -> _Message | None:
        """The message if ``delivery`` still holds it (its receipt is the current one)."""
        seq, receipt = delivery.handle
        message = self._messages.get(seq)
        if message is None or message.receipt is None or message.receipt != receipt:
            return None
        return message

    def ack(self, delivery: Delivery) -> None:
        with self._changed:
            if self._held(delivery) is not None:
                del self._messages[delivery.handle[0]]

    def retry(self, delivery: Delivery, delay: float) -> None:
        with self._changed:
            message = self._held(delivery)
            if message is not None:
                message.visible_at = self._now() + max(0.0, delay)
                message.receipt = None
                self._changed.notify_all()

    def extend(self, delivery: Delivery, visibility: float) -> None:
        with self._changed:
            message = self._held(delivery)
            if message is not None:
                message.visible_at = self._now() + visibility

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        with self._changed:
            message = self._held(delivery)
            if message is not None:
                self._to_dead_letters(message, reason, description, self._now())

    def _to_dead_letters(
        self, message: _Message, reason: str, description: str, now: float
    ) -> None:
        del self._messages[message.seq]
        message.receipt = None
        message.reason, message.description, message.dead_lettered_at = reason, description, now
        self._dead[message.seq] = message

    # -- DeadLetters --------------------------------------------------------------------------
    def _dead_in_order(self) -> list[_Message]:
        return sorted(self._dead.values(), key=lambda m: (m.dead_lettered_at or 0.0, m.seq))

    def dlq_depth(self) -> int:
        with self._changed:
            return len(self._dead)

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        with self._changed:
            return [
                DeadLetter(
                    message_id=m.message_id,
                    body=m.body,
                    attributes=dict(m.attributes),
                    reason=m.reason,
                    description=m.description,
                    attempts=m.deliveries,
                    dead_lettered_at=(
                        datetime.fromtimestamp(m.dead_lettered_at, UTC)
                        if m.dead_lettered_at is not None
                        else None
                    ),
                )
                for m in self._dead_in_order()[:limit]
            ]

    def redrive(self, limit: int = 10) -> int:
        if limit < 1:
            raise ValueError("redrive limit must be at least 1")
        with self._changed:
            now = self._now()
            moved = self._dead_in_order()[:limit]
            for message in moved:
                del self._dead[message.seq]
                generation = int(message.attributes.get(REDRIVE_ATTRIBUTE, "0")) + 1
                message.attributes[REDRIVE_ATTRIBUTE] = str(generation)
                message.deliveries, message.visible_at = 0, now
                message.reason, message.description, message.dead_lettered_at = "", "", None
                self._messages[message.seq] = message
            self._changed.notify_all()
            return len(moved)

    def __repr__(self) -> str:
        return f"MemoryQueue({len(self._messages)} pending, {len(self._dead)} dead-lettered)"
