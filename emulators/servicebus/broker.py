"""In-memory queue state: sequence numbers, peek-locks, delivery counts, dead letters, deferral,
scheduled messages, duplicate detection and TTL. No I/O and no proton types.

Threading contract: a :class:`Broker` is used from one thread only (the AMQP server's event loop);
other threads hand it work through the server. Times are wall-clock seconds (``clock()``), since
lock expiry and enqueue times are shown to clients as UTC timestamps.

Semantics follow Service Bus:

* ``delivery_count`` (AMQP ``header.delivery-count``) counts *failed* attempts: 0 on the first
  delivery, +1 on abandon or lock expiry. A release (the SDK returning a prefetched message it
  never handed to the application) does not count.
* When a failed attempt brings the count to ``MaxDeliveryCount`` the message moves to
  ``$DeadLetterQueue`` with reason ``MaxDeliveryCountExceeded``.
* An expired message is dropped, or dead-lettered with reason ``TTLExpiredException`` when the
  queue has ``DeadLetteringOnMessageExpiration``. A locked message expires after its lock ends.
* Dead-lettered messages keep their sequence number, never expire and never dead-letter again.
"""

from __future__ import annotations

import heapq
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from . import codec
from .config import EmulatorConfig, QueueConfig

DLQ_SUFFIX = "$deadletterqueue"
MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"
TTL_EXPIRED = "TTLExpiredException"

_SEQ = codec.enc_symbol("x-opt-sequence-number")
_ENQUEUED = codec.enc_symbol("x-opt-enqueued-time")
_LOCKED_UNTIL = codec.enc_symbol("x-opt-locked-until")
_STATE = codec.enc_symbol("x-opt-message-state")
_SCHEDULED_KEY = "x-opt-scheduled-enqueue-time"
_BROKER_KEYS = {
    "x-opt-sequence-number",
    "x-opt-enqueued-time",
    "x-opt-locked-until",
    "x-opt-message-state",
    "x-opt-lock-token",
}


class MessageState(IntEnum):
    """``x-opt-message-state`` values (``ServiceBusMessageState``)."""

    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


class BrokerError(Exception):
    """An operation the broker refuses; ``condition`` is the AMQP error condition to report."""

    def __init__(self, condition: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description
        self.status = status


def lock_lost(token: uuid.UUID) -> BrokerError:
    return BrokerError(
        "com.microsoft:message-lock-lost",
        f"The lock supplied is invalid. Either the lock expired, or the message has already "
        f"been removed from the queue. Reference: {token}",
        410,
    )


class StoredMessage:
    """One message in a sub-queue. Byte fields are the sender's encoding, kept verbatim."""

    __slots__ = (
        "ann_count",
        "ann_entries",
        "app_props",
        "available",
        "body",
        "delivery_count",
        "durable",
        "enqueued_at",
        "expires_at",
        "lock_token",
        "locked_until",
        "message_id",
        "priority",
        "props",
        "seq",
        "state",
        "ttl_ms",
    )

    def __init__(self, seq: int, parsed: codec.ParsedMessage, enqueued_at: float) -> None:
        self.seq = seq
        annotations = {k: v for k, v in parsed.annotations.items() if str(k) not in _BROKER_KEYS}
        self.ann_count, self.ann_entries = codec.encode_annotation_entries(annotations)
        self.props = parsed.props
        self.app_props = parsed.app_props
        self.body = parsed.body
        self.durable = parsed.durable
        self.priority = parsed.priority
        self.ttl_ms = parsed.ttl_ms
        self.message_id = parsed.message_id
        self.enqueued_at = enqueued_at
        self.expires_at: float | None = None
        self.delivery_count = 0
        self.state = MessageState.ACTIVE
        self.lock_token: uuid.UUID | None = None
        self.locked_until = 0.0
        self.available = False

    @property
    def size(self) -> int:
        return len(self.props) + len(self.app_props) + len(self.body) + len(self.ann_entries)

    def render(self) -> bytes:
        """The message as delivered: fresh header and annotations, then the sender's bytes."""
        header = codec.encode_header(
            durable=self.durable,
            priority=self.priority,
            ttl_ms=self.ttl_ms,
            delivery_count=self.delivery_count,
        )
        entries = [
            _SEQ,
            codec.enc_long(self.seq),
            _ENQUEUED,
            codec.enc_timestamp(int(self.enqueued_at * 1000)),
            _STATE,
            codec.enc_int(int(self.state)),
        ]
        if self.lock_token is not None:
            entries += [_LOCKED_UNTIL, codec.enc_timestamp(int(self.locked_until * 1000))]
        annotations = codec.encode_annotations(entries, self.ann_count, self.ann_entries)
        return header + annotations + self.props + self.app_props + self.body


class SubQueue:
    """A queue's main sub-queue or its dead-letter sub-queue."""

    def __init__(self, queue: Queue, dead_letter: bool) -> None:
        self.queue = queue
        self.dead_letter = dead_letter
        self.messages: dict[int, StoredMessage] = {}
        self._available: list[int] = []
        self.locks: dict[uuid.UUID, StoredMessage] = {}
        self._lock_heap: list[tuple[float, uuid.UUID]] = []

    @property
    def path(self) -> str:
        return self.queue.config.name + ("/$DeadLetterQueue" if self.dead_letter else "")

    def counts(self) -> dict[str, int]:
        states = [m.state for m in self.messages.values()]
        return {
            "messages": len(states),
            "active": states.count(MessageState.ACTIVE),
            "deferred": states.count(MessageState.DEFERRED),
            "scheduled": states.count(MessageState.SCHEDULED),
            "locked": len(self.locks),
        }

    def make_available(self, msg: StoredMessage) -> None:
        if not msg.available:
            msg.available = True
            heapq.heappush(self._available, msg.seq)

    def has_available(self) -> bool:
        while self._available:
            msg = self.messages.get(self._available[0])
            if msg is not None and msg.available:
                return True
            heapq.heappop(self._available)
        return False

    def pop_available(self) -> StoredMessage | None:
        while self._available:
            msg = self.messages.get(heapq.heappop(self._available))
            if msg is not None and msg.available:
                msg.available = False
                return msg
        return None

    def lock(self, msg: StoredMessage, now: float) -> uuid.UUID:
        token = uuid.uuid4()
        msg.lock_token = token
        msg.locked_until = now + self.queue.config.lock_duration
        self.locks[token] = msg
        heapq.heappush(self._lock_heap, (msg.locked_until, token))
        return token

    def unlock(self, msg: StoredMessage) -> None:
        if msg.lock_token is not None:
            self.locks.pop(msg.lock_token, None)
        msg.lock_token = None
        msg.locked_until = 0.0

    def expired_locks(self, now: float) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        while self._lock_heap and self._lock_heap[0][0] <= now:
            until, token = heapq.heappop(self._lock_heap)
            msg = self.locks.get(token)
            if msg is not None and msg.locked_until == until:
                out.append(msg)
        return out

    def reset(self) -> None:
        self.messages.clear()
        self._available.clear()
        self.locks.clear()
        self._lock_heap.clear()


@dataclass
class Queue:
    """A queue: its config, the two sub-queues, scheduling, expiry and dedup bookkeeping."""

    config: QueueConfig
    next_seq: int = 1
    main: SubQueue = field(init=False)
    dlq: SubQueue = field(init=False)
    scheduled: list[tuple[float, int]] = field(default_factory=list)
    expiries: list[tuple[float, int]] = field(default_factory=list)
    seen_ids: dict[Any, float] = field(default_factory=dict)
    seen_order: deque[tuple[float, Any]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.main = SubQueue(self, dead_letter=False)
        self.dlq = SubQueue(self, dead_letter=True)

    def take_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq


class Broker:
    """All queues of one namespace. See the module docstring for the semantics."""

    def __init__(self, config: EmulatorConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.queues: dict[str, Queue] = {k: Queue(q) for k, q in config.queues.items()}

    # --- entities ---------------------------------------------------------------------------

    def resolve(self, path: str) -> SubQueue | None:
        """The sub-queue for an entity path (``q``, ``q/$DeadLetterQueue``), or None."""
        parts = [p for p in path.strip("/").split("/") if p]
        dead_letter = bool(parts) and parts[-1].lower() == DLQ_SUFFIX
        if dead_letter:
            parts = parts[:-1]
        queue = self.queues.get("/".join(parts).lower())
        if queue is None:
            return None
        return queue.dlq if dead_letter else queue.main

    def put_queue(self, config: QueueConfig) -> Queue:
        """Create the queue, or replace its config (keeping messages) when it exists."""
        existing = self.queues.get(config.name.lower())
        if existing is not None:
            existing.config = config
            return existing
        queue = Queue(config)
        self.queues[config.name.lower()] = queue
        return queue

    def delete_queue(self, name: str) -> bool:
        return self.queues.pop(name.lower(), None) is not None

    def reset(self) -> None:
        """Back to the configured queues, all empty (sequence numbers restart at 1)."""
        self.queues = {k: Queue(q) for k, q in self.config.queues.items()}

    # --- sending ----------------------------------------------------------------------------

    def enqueue(self, sub: SubQueue, raw: bytes) -> list[int]:
        """Store one transfer (a message or a batch envelope). Returns the sequence numbers of
        the messages stored (duplicates dropped by detection are accepted but not stored).
        Raises :class:`codec.CodecError` when the transfer is not a message."""
        if sub.dead_letter:
            raise BrokerError("amqp:not-allowed", "Cannot send to a dead-letter queue.")
        inner = codec.split_batch(raw)
        parsed = [codec.parse_message(m) for m in (inner if inner is not None else [raw])]
        now = self.clock()
        seqs: list[int] = []
        for p in parsed:
            seq = self._store(sub.queue, p, now, scheduled_at=_scheduled_time(p))
            if seq is not None:
                seqs.append(seq)
        return seqs

    def schedule(self, sub: SubQueue, raw: bytes) -> int:
        """Store a message from a ``schedule-message`` request; returns its sequence number."""
        parsed = codec.parse_message(raw)
        when = _scheduled_time(parsed)
        seq = self._store(sub.queue, parsed, self.clock(), scheduled_at=when, dedup=False)
        assert seq is not None
        return seq

    def cancel_scheduled(self, sub: SubQueue, seqs: Iterable[int]) -> None:
        for seq in seqs:
            msg = sub.messages.get(seq)
            if msg is None or msg.state != MessageState.SCHEDULED:
                raise BrokerError(
                    "com.microsoft:message-not-found",
                    f"The scheduled message with sequence number {seq} was not found.",
                    404,
                )
        for seq in seqs:
            sub.messages.pop(seq, None)

    def _store(
        self,
        queue: Queue,
        parsed: codec.ParsedMessage,
        now: float,
        *,
        scheduled_at: float | None,
        dedup: bool = True,
    ) -> int | None:
        cfg = queue.config
        if dedup and cfg.requires_duplicate_detection and parsed.message_id is not None:
            self._prune_seen(queue, now)
            key = parsed.message_id
            if key in queue.seen_ids:
                return None
            queue.seen_ids[key] = now
            queue.seen_order.append((now, key))
        msg = StoredMessage(queue.take_seq(), parsed, now)
        ttl = parsed.ttl_ms / 1000.0 if parsed.ttl_ms else None
        if cfg.default_ttl is not None:
            ttl = cfg.default_ttl if ttl is None else min(ttl, cfg.default_ttl)
            if msg.ttl_ms is None and ttl * 1000 < 2**32:
                msg.ttl_ms = int(ttl * 1000)
        queue.main.messages[msg.seq] = msg
        if scheduled_at is not None and scheduled_at > now:
            msg.state = MessageState.SCHEDULED
            msg.enqueued_at = scheduled_at
            heapq.heappush(queue.scheduled, (scheduled_at, msg.seq))
        else:
            queue.main.make_available(msg)
        if ttl is not None:
            msg.expires_at = msg.enqueued_at + ttl
            heapq.heappush(queue.expiries, (msg.expires_at, msg.seq))
        return msg.seq

    def _prune_seen(self, queue: Queue, now: float) -> None:
        window = queue.config.duplicate_detection_window
        while queue.seen_order and queue.seen_order[0][0] <= now - window:
            _, key = queue.seen_order.popleft()
            if queue.seen_ids.get(key, now) <= now - window:
                del queue.seen_ids[key]

    # --- receiving --------------------------------------------------------------------------

    def acquire(self, sub: SubQueue, *, peek_lock: bool) -> tuple[StoredMessage, bytes] | None:
        """The next available message, locked (peek-lock) or removed (receive-and-delete),
        with its rendered bytes; None when nothing is available."""
        now = self.clock()
        while True:
            msg = sub.pop_available()
            if msg is None:
                return None
            if not sub.dead_letter and msg.expires_at is not None and msg.expires_at <= now:
                self._expire(sub.queue, msg)
                continue
            if peek_lock:
                sub.lock(msg, now)
                return msg, msg.render()
            del sub.messages[msg.seq]
            return msg, msg.render()

    def _locked(self, sub: SubQueue, token: uuid.UUID) -> StoredMessage:
        msg = sub.locks.get(token)
        if msg is None or msg.locked_until <= self.clock():
            raise lock_lost(token)
        return msg

    def complete(self, sub: SubQueue, token: uuid.UUID) -> None:
        msg = self._locked(sub, token)
        sub.unlock(msg)
        del sub.messages[msg.seq]

    def abandon(self, sub: SubQueue, token: uuid.UUID, *, failed: bool = True) -> None:
        """Unlock; ``failed`` (abandon) counts an attempt, a release does not."""
        msg = self._locked(sub, token)
        self._return(sub, msg, failed=failed)

    def defer(self, sub: SubQueue, token: uuid.UUID) -> None:
        msg = self._locked(sub, token)
        sub.unlock(msg)
        msg.state = MessageState.DEFERRED

    def dead_letter(
        self, sub: SubQueue, token: uuid.UUID, reason: str | None, description: str | None
    ) -> None:
        msg = self._locked(sub, token)
        sub.unlock(msg)
        if sub.dead_letter:
            # Production refuses to dead-letter from the DLQ; the message stays put.
            raise BrokerError("amqp:not-allowed", "Cannot dead-letter from a dead-letter queue.")
        self._move_to_dlq(sub.queue, msg, reason, description)

    def renew(self, sub: SubQueue, token: uuid.UUID) -> float:
        """Extend the lock by the queue's LockDuration; returns the new locked-until time."""
        msg = self._locked(sub, token)
        msg.locked_until = self.clock() + sub.queue.config.lock_duration
        heapq.heappush(sub._lock_heap, (msg.locked_until, token))
        return msg.locked_until

    def expire_locks(self, name: str) -> int:
        """End every lock held on queue ``name`` (both sub-queues) now, exactly as if its
        LockDuration had elapsed: each message is available again with delivery count + 1
        (dead-lettered at MaxDeliveryCount), and renewing or settling with the old lock token
        fails with lock-lost. Returns how many locks ended; KeyError for an unknown queue."""
        queue = self.queues[name.lower()]
        ended = 0
        for sub in (queue.main, queue.dlq):
            for msg in list(sub.locks.values()):
                self._return(sub, msg, failed=True)
                ended += 1
        return ended

    def peek(self, sub: SubQueue, from_seq: int, count: int) -> list[StoredMessage]:
        seqs = heapq.nsmallest(max(count, 0), (s for s in sub.messages if s >= from_seq))
        return [sub.messages[s] for s in seqs]

    def receive_deferred(
        self, sub: SubQueue, seqs: list[int], *, peek_lock: bool
    ) -> list[tuple[StoredMessage, bytes]]:
        now = self.clock()
        found: list[StoredMessage] = []
        for seq in seqs:
            msg = sub.messages.get(seq)
            if msg is None or msg.state != MessageState.DEFERRED or msg.lock_token is not None:
                raise BrokerError(
                    "com.microsoft:message-not-found",
                    f"Failed to lock one or more specified messages. Either the message is not "
                    f"deferred, was already received, or does not exist (sequence number {seq}).",
                    404,
                )
            found.append(msg)
        out: list[tuple[StoredMessage, bytes]] = []
        for msg in found:
            if peek_lock:
                sub.lock(msg, now)
            else:
                del sub.messages[msg.seq]
            out.append((msg, msg.render()))
        return out

    # --- time -------------------------------------------------------------------------------

    def tick(self) -> set[SubQueue]:
        """Apply lock expiry, scheduled activation and TTL expiry due by now. Returns the
        sub-queues that gained available messages (the server delivers from those)."""
        now = self.clock()
        woken: set[SubQueue] = set()
        for queue in list(self.queues.values()):
            for sub in (queue.main, queue.dlq):
                for msg in sub.expired_locks(now):
                    self._return(sub, msg, failed=True)
                    woken.add(sub)
            while queue.scheduled and queue.scheduled[0][0] <= now:
                _, seq = heapq.heappop(queue.scheduled)
                due = queue.main.messages.get(seq)
                if due is not None and due.state == MessageState.SCHEDULED:
                    due.state = MessageState.ACTIVE
                    queue.main.make_available(due)
                    woken.add(queue.main)
            while queue.expiries and queue.expiries[0][0] <= now:
                _, seq = heapq.heappop(queue.expiries)
                old = queue.main.messages.get(seq)
                if old is None or old.state == MessageState.SCHEDULED:
                    continue
                if old.lock_token is None:
                    self._expire(queue, old)
                # a locked message is checked again when its lock ends (see _return)
            if queue.dlq.has_available():
                woken.add(queue.dlq)
        return woken

    def _return(self, sub: SubQueue, msg: StoredMessage, *, failed: bool) -> None:
        sub.unlock(msg)
        if failed:
            msg.delivery_count += 1
        if sub.dead_letter:
            if msg.state == MessageState.ACTIVE:
                sub.make_available(msg)
            return
        queue = sub.queue
        if failed and msg.delivery_count >= queue.config.max_delivery_count:
            self._move_to_dlq(
                queue,
                msg,
                MAX_DELIVERY_COUNT_EXCEEDED,
                f"Message could not be consumed after {queue.config.max_delivery_count} "
                f"delivery attempts.",
            )
            return
        if msg.expires_at is not None and msg.expires_at <= self.clock():
            self._expire(queue, msg)
            return
        if msg.state == MessageState.ACTIVE:
            sub.make_available(msg)

    def _expire(self, queue: Queue, msg: StoredMessage) -> None:
        if queue.config.dead_lettering_on_expiration:
            self._move_to_dlq(queue, msg, TTL_EXPIRED, "The message expired and was dead lettered.")
        else:
            queue.main.messages.pop(msg.seq, None)
            msg.available = False

    def _move_to_dlq(
        self, queue: Queue, msg: StoredMessage, reason: str | None, description: str | None
    ) -> None:
        queue.main.messages.pop(msg.seq, None)
        msg.available = False
        extra: dict[str, Any] = {}
        if reason is not None:
            extra["DeadLetterReason"] = reason
        if description is not None:
            extra["DeadLetterErrorDescription"] = description
        if extra:
            current: dict[Any, Any] = {}
            if msg.app_props:
                current = dict(getattr(codec.decode(msg.app_props), "value", None) or {})
            current.update(extra)
            msg.app_props = codec.encode_string_map_section(codec.APPLICATION_PROPERTIES, current)
        msg.state = MessageState.ACTIVE
        msg.expires_at = None
        queue.dlq.messages[msg.seq] = msg
        queue.dlq.make_available(msg)

    # --- introspection ----------------------------------------------------------------------

    def describe(self) -> list[dict[str, Any]]:
        """Per-queue counts (for the admin API and tests)."""
        out = []
        for queue in self.queues.values():
            out.append(
                {
                    "name": queue.config.name,
                    **queue.main.counts(),
                    "dead_letter": queue.dlq.counts()["messages"],
                }
            )
        return out


def _scheduled_time(parsed: codec.ParsedMessage) -> float | None:
    for key, value in parsed.annotations.items():
        if str(key) == _SCHEDULED_KEY and value is not None:
            return float(int(value)) / 1000.0
    return None
