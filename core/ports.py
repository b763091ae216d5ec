"""The two ports every provider implements: a :class:`Store` and a :class:`Queue`.

Adapters implement the underscore methods; the public methods add the bookkeeping shared by every
backend (round-trip counting, argument checks). The conformance suite in ``tests/conformance``
checks each contract stated here against every adapter.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Version = Any  #: opaque record version: SQLite counter, Firestore update_time, Table ETag

# Record kinds. Every record belongs to one job (its partition), so that all records a commit
# touches can live in one atomic unit (Table Storage entity-group transactions need this).
RUN = "run"  #: id = window text; the run record with its lease and fence
LOCK = "lock"  #: id = "" ; exists while a run of the job holds the job's overlap lock
STATUS = "status"  #: id = "" ; the job's heartbeat / status, also carries alert state
ITEM = "item"  #: id = "<window>/<item key>"; the per-item ledger
KINDS = (RUN, LOCK, STATUS, ITEM)


@dataclass(frozen=True)
class Key:
    kind: str
    job: str
    id: str = ""


@dataclass(frozen=True)
class Record:
    key: Key
    data: dict[str, Any]
    version: Version


@dataclass(frozen=True)
class Create:
    """Create ``key`` with ``data``; fails the commit (reason ``exists``) if it exists."""

    key: Key
    data: Mapping[str, Any]


@dataclass(frozen=True)
class Update:
    """Replace ``key``'s data if its version is still ``version``; else fail (``version``)."""

    key: Key
    data: Mapping[str, Any]
    version: Version


@dataclass(frozen=True)
class Delete:
    """Delete ``key`` if its version is still ``version``; else fail (``version``)."""

    key: Key
    version: Version


@dataclass(frozen=True)
class Merge:
    """Upsert without a precondition: set ``fields``, add ``increments`` to integer fields
    (missing fields count as 0), and raise integer fields to at least ``maximums`` (missing
    fields take the value). Other fields of an existing record are kept."""

    key: Key
    fields: Mapping[str, Any] = field(default_factory=dict)
    increments: Mapping[str, int] = field(default_factory=dict)
    maximums: Mapping[str, int] = field(default_factory=dict)


Op = Create | Update | Delete | Merge


class Store(abc.ABC):
    """Durable records with two atomic primitives: create-if-absent and compare-and-set.

    Contract, checked by the conformance suite:

    * ``commit(ops)`` applies every op or none. A failed precondition raises
      :class:`~cronwarden.errors.CommitConflict` with the index of the first failing op.
      It returns, per op, the record's new version (``None`` for deletes).
    * All ops of one commit belong to the same job and touch distinct records (Firestore and
      Table Storage refuse two writes to one record in a commit); at most
      :attr:`max_commit_ops` ops.
    * A version changes on every write of the record, and versions of one key never repeat
      while the record exists (a stale writer can never match).
    * ``query`` returns records of one kind, optionally of one job, whose id starts with
      ``prefix`` and lies in ``[start, end)``, ordered by (job, id). One round trip.
    * Data values are JSON types (str, int, float, bool, None, list, dict); datetimes are
      stored as ISO text by the caller. Adapters return the data they were given.
    * Every read or commit is one round trip, counted in :attr:`round_trips`.
    """

    max_commit_ops: int = 500

    def __init__(self) -> None:
        self._rt_lock = threading.Lock()
        self.round_trips = 0

    def _count(self) -> None:
        with self._rt_lock:
            self.round_trips += 1

    def get(self, key: Key) -> Record | None:
        self._count()
        return self._get(key)

    def commit(self, ops: Sequence[Op]) -> list[Version]:
        if not ops:
            return []
        if len(ops) > self.max_commit_ops:
            raise ValueError(f"{len(ops)} ops in one commit; the limit is {self.max_commit_ops}")
        jobs = {op.key.job for op in ops}
        if len(jobs) != 1:
            raise ValueError(f"a commit must touch one job's records, got {sorted(jobs)}")
        if len({op.key for op in ops}) != len(ops):
            raise ValueError("a commit must touch each record at most once")
        self._count()
        return self._commit(list(ops))

    def query(
        self,
        kind: str,
        job: str | None = None,
        *,
        prefix: str = "",
        start: str | None = None,
        end: str | None = None,
        limit: int | None = None,
    ) -> list[Record]:
        self._count()
        return self._query(kind, job, prefix, start, end, limit)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Idempotent."""

    @abc.abstractmethod
    def _get(self, key: Key) -> Record | None: ...

    @abc.abstractmethod
    def _commit(self, ops: list[Op]) -> list[Version]: ...

    @abc.abstractmethod
    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]: ...


@dataclass
class Delivery:
    """One delivery of a queued message to a worker."""

    message_id: str
    body: bytes
    attributes: dict[str, str]
    attempt: int  #: 1 on first delivery; the broker's count (the run record's count rules)
    handle: Any = field(repr=False, default=None)  #: adapter's receipt (ack id, lock token)
    enqueued_at: datetime | None = None


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    body: bytes
    attributes: dict[str, str]
    reason: str
    description: str
    attempts: int
    dead_lettered_at: datetime | None = None


REDRIVE_ATTRIBUTE = "cw-redrive"  #: redrive generation a redriven message carries (1, 2, ...)
REASON_ATTRIBUTE = "cw-dead-letter-reason"


@dataclass(frozen=True)
class QueueCapabilities:
    """What a broker does by itself, so the core never has to guess from the adapter's class.

    ``dedup``: a ``publish`` with a ``dedup_id`` seen within the dedup window enqueues nothing.
    ``max_deliveries``: the broker itself dead-letters a message after that many unsettled
    deliveries (``None``: it never does; the worker's verdicts are the only way to the DLQ).
    ``max_delay``: the longest ``delay`` one publish or retry can carry (seconds; ``None``: no
    limit); longer postponements are chained by the caller.
    """

    dedup: bool = False
    max_deliveries: int | None = None
    max_delay: float | None = None


class Publisher(abc.ABC):
    """The role of whoever enqueues run requests (a trigger, a scheduler tick, a redrive)."""

    capabilities: QueueCapabilities = QueueCapabilities()

    @abc.abstractmethod
    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        """Enqueue ``body``; with a ``dedup_id`` seen within the broker's dedup window, enqueue
        nothing (brokers without deduplication may deliver twice: the store's claim dedupes)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Idempotent."""


class Consumer(abc.ABC):
    """The role of a pull worker: receive deliveries and settle each one exactly once.

    A received message is invisible to other receivers for ``visibility`` seconds, or until
    settled. Unsettled, it is delivered again with ``attempt`` + 1. ``ack`` removes it,
    ``retry(delay)`` makes it visible again after about ``delay``, ``dead_letter(reason)`` moves
    it to the dead-letter queue with the reason. Hosts whose platform settles for them (a push
    endpoint, a Functions trigger) do not implement this role: they apply a
    :class:`~cronwarden.settlement.Verdict` in their own way.
    """

    @abc.abstractmethod
    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        """Up to ``max_messages`` deliveries, waiting up to ``wait`` seconds for the first."""

    @abc.abstractmethod
    def ack(self, delivery: Delivery) -> None: ...

    @abc.abstractmethod
    def retry(self, delivery: Delivery, delay: float) -> None: ...

    @abc.abstractmethod
    def extend(self, delivery: Delivery, visibility: float) -> None:
        """Keep the delivery invisible for ``visibility`` more seconds (long runs)."""

    @abc.abstractmethod
    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None: ...


class DeadLetters(abc.ABC):
    """The operator's view of the dead-letter queue: depth, peek, capped redrive.

    ``dlq_peek`` does not consume; ``redrive(limit)`` moves at most ``limit`` messages back,
    each carrying :data:`REDRIVE_ATTRIBUTE` incremented, and returns how many moved.
    """

    @abc.abstractmethod
    def dlq_depth(self) -> int: ...

    @abc.abstractmethod
    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]: ...

    @abc.abstractmethod
    def redrive(self, limit: int = 10) -> int: ...


class Queue(Publisher, Consumer, DeadLetters):
    """A full broker binding: every role at once (what a pull worker and the CLI use).

    Contract, checked by the conformance suite: the three roles' contracts, plus: after
    ``capabilities.max_deliveries`` deliveries without settlement, the broker moves a message to
    the DLQ; with ``capabilities.dedup`` a repeated ``dedup_id`` enqueues nothing.
    """


class Provider(abc.ABC):
    """A configured pair of store and queue (plus provider-specific extras)."""

    name: str = "abstract"

    @abc.abstractmethod
    def store(self) -> Store: ...

    @abc.abstractmethod
    def queue(self) -> Queue: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release everything the provider opened."""
