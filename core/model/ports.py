"""The two ports every provider implements: a :class:`Store` and a :class:`Queue`.

Adapters implement the underscore methods; the public methods add the bookkeeping shared by every
backend (round-trip counting, argument checks). The conformance suite in ``tests/conformance``
checks each contract stated here against every adapter.
"""

from __future__ import annotations

import abc
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

Version = Any  #: opaque record version: SQLite counter, Firestore update_time, Table ETag

# Record kinds. Every record belongs to one job (its partition), so that all records a commit
# touches can live in one atomic unit (Table Storage entity-group transactions need this).
RUN = "run"  #: id = window text; the run record with its lease and fence
LOCK = "lock"  #: id = "" ; exists while a run of the job holds the job's overlap lock
STATUS = "status"  #: id = "" ; the job's heartbeat / status, also carries alert state
ITEM = "item"  #: id = "<window>/<item key>"; the per-item ledger
#: id = "<window>/<dependent job>"; a completion event waiting to be published (under the
#: upstream job: it is written in the upstream's completion commit;
#: :mod:`cronwarden.run.dependencies`)
OUTBOX = "outbox"
KINDS = (RUN, LOCK, STATUS, ITEM, OUTBOX)

#: The two integer fields (epoch seconds) of a status record that :meth:`Store.query_due` ranges
#: over: ``due_at``, written by the run's own commits (when what they recorded becomes a problem
#: if nothing else happens), and ``watch_due``, written by the watcher (when it must look
#: again). Stores that index fields index these two.
DUE_FIELDS = ("due_at", "watch_due")


def due_of(data: Mapping[str, Any]) -> int | None:
    """The earliest of a record's :data:`DUE_FIELDS` that holds an integer; None if none does."""
    found = [
        v
        for v in (data.get(f) for f in DUE_FIELDS)
        if isinstance(v, int) and not isinstance(v, bool)
    ]
    return min(found) if found else None


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


@dataclass(frozen=True)
class StoreCapabilities:
    """What a backend does atomically, inside one commit and one round trip.

    ``max_commit_ops``: most ops one commit may carry (Firestore 500, Table Storage 100).
    ``atomic_increment`` / ``atomic_maximum``: a :class:`Merge` with ``increments`` /
    ``maximums`` is applied server-side in the commit's one round trip. When ``False`` the
    adapter reads the record first (one more round trip per such Merge, counted), so callers
    on a hot path write a plain field whenever they can prove it correct.
    ``native_types``: types a top-level field may hold besides JSON types, because the backend
    stores them natively (Table Storage: aware ``datetime``); the engine never relies on them.
    ``max_page_bytes``: the largest ledger page (compact JSON of its data) the ledger writes as
    one record: the backend's record and field size limits less a margin (Table Storage 64 KiB
    per property, DynamoDB 400 KB items, Firestore 1 MiB documents). A claimed batch that
    would not fit is split into several pages.
    ``max_text_bytes``: the longest text (UTF-8 bytes) the engine writes into one field from
    text it did not write itself (a handler's error, a traceback): the backend's field or
    property limit less a margin (Table Storage 64 KiB of UTF-16 per property). Such text is
    also made storable (:func:`cronwarden.model.text.storable`) before it is committed.
    """

    max_commit_ops: int = 500
    atomic_increment: bool = True
    atomic_maximum: bool = True
    native_types: tuple[type, ...] = ()
    max_page_bytes: int = 256_000
    max_text_bytes: int = 64_000


@dataclass(frozen=True)
class RoundTrip:
    """One request to the backend, as reported to :meth:`Store.add_observer` callbacks.

    ``operation`` is ``get``, ``commit``, ``query`` or ``read`` (a read an adapter makes on its
    own, e.g. Table Storage before a Merge with increments, or a further result page).
    """

    operation: str
    kind: str = ""
    ops: int = 0  #: ops of a commit


RoundTripObserver = Callable[[RoundTrip], None]

_JSON_SCALARS = (str, int, float, bool, type(None))
_EXACT_SCALARS = frozenset(_JSON_SCALARS)  #: a fast path for long lists (ledger pages)


def check_json(value: Any, where: str = "data") -> None:
    """Raise ``ValueError`` unless ``value`` is made of JSON types (dict keys are text)."""
    if isinstance(value, _JSON_SCALARS):
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            if type(item) not in _EXACT_SCALARS:
                check_json(item, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str):
                raise ValueError(f"{where}: field names must be text, got {name!r}")
            if type(item) not in _EXACT_SCALARS:  # no path text built for a plain value
                check_json(item, f"{where}.{name}")
        return
    raise ValueError(f"{where}: {type(value).__name__} is not a JSON type (store ISO text)")


_DECODER = json.JSONDecoder()


def decode_json(text: str) -> Any:
    """``text`` as exactly one JSON document, decoded by the C scanner alone (``raw_decode``:
    without ``json.loads``'s whitespace scans, most of a small record's decoding cost when a
    query decodes thousands); a text that is not exactly one document goes through
    ``json.loads``, which accepts surrounding whitespace and raises for anything else."""
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        end = -1
    return value if end == len(text) else json.loads(text)


def check_key(key: Key) -> None:
    """Raise ``ValueError`` unless ``key`` names a known kind, a job and a text id."""
    if key.kind not in KINDS:
        raise ValueError(f"unknown record kind {key.kind!r}; expected one of {KINDS}")
    if not isinstance(key.job, str) or not key.job:
        raise ValueError(f"a record key needs a job name, got {key.job!r}")
    if not isinstance(key.id, str):
        raise ValueError(f"a record id is text, got {key.id!r}")


def check_merge(op: Merge) -> None:
    """A Merge names each field once (fields, increments, maximums); counters are integers."""
    groups = (set(op.fields), set(op.increments), set(op.maximums))
    if sum(len(g) for g in groups) != len(set().union(*groups)):
        raise ValueError("a Merge may name each field once (fields, increments, maximums)")
    for name, amount in (*op.increments.items(), *op.maximums.items()):
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise ValueError(f"Merge counter {name!r} must be an integer, got {amount!r}")


def check_data(data: Mapping[str, Any], where: str = "data", native: tuple[type, ...] = ()) -> None:
    """Raise ``ValueError`` unless ``data`` holds JSON values (or, as top-level fields,
    values of the ``native`` types a backend declares)."""
    for name, value in data.items():
        if not isinstance(name, str):
            raise ValueError(f"{where}: field names must be text, got {name!r}")
        if type(value) in _EXACT_SCALARS or (native and isinstance(value, native)):
            continue  # a plain JSON value (most fields): no path text built for it
        check_json(value, f"{where}.{name}")


def check_commit(ops: Sequence[Op], capabilities: StoreCapabilities) -> None:
    """The rules every commit obeys, whatever the backend (raises ``ValueError``)."""
    max_commit_ops = capabilities.max_commit_ops
    if len(ops) > max_commit_ops:
        raise ValueError(f"{len(ops)} ops in one commit; the limit is {max_commit_ops}")
    for op in ops:
        check_key(op.key)
    jobs = {op.key.job for op in ops}
    if len(jobs) != 1:
        raise ValueError(f"a commit must touch one job's records, got {sorted(jobs)}")
    if len({op.key for op in ops}) != len(ops):
        raise ValueError("a commit must touch each record at most once")
    native = capabilities.native_types
    for op in ops:
        where = f"{op.key.kind} {op.key.job}/{op.key.id}"
        if isinstance(op, Create | Update):
            check_data(op.data, where, native)
        elif isinstance(op, Merge):
            check_merge(op)
            check_data(op.fields, where, native)


def apply_merge(existing: Mapping[str, Any] | None, merge: Merge) -> dict[str, Any]:
    """The record data after ``merge`` on ``existing`` (``None``: no record yet).

    The one statement of Merge semantics, for adapters that compute a merge client-side:
    ``fields`` are set, ``increments`` added to integer fields (missing or null count as 0),
    ``maximums`` raise integer fields (a missing or null field takes the value); every other
    field of ``existing`` is kept.
    """
    data = dict(existing or {})
    data.update(merge.fields)
    for name, amount in merge.increments.items():
        data[name] = int(data.get(name) or 0) + amount
    for name, floor in merge.maximums.items():
        current = data.get(name)
        data[name] = floor if current is None else max(int(current), floor)
    return data


def merged_fields(existing: Mapping[str, Any] | None, merge: Merge) -> dict[str, Any]:
    """Only the fields ``merge`` changes, with their values after :func:`apply_merge`."""
    after = apply_merge(existing, merge)
    return {name: after[name] for name in (*merge.fields, *merge.increments, *merge.maximums)}


class Store(abc.ABC):
    """Durable records with two atomic primitives: create-if-absent and compare-and-set.

    Contract, checked by the conformance suite (``tests/conformance``):

    * ``commit(ops)`` applies every op or none. It returns, per op, the record's new version
      (``None`` for deletes).
    * The rules of :func:`check_commit`, enforced here before an adapter sees a commit
      (``ValueError``): known kinds, one job per commit (Table Storage transactions are one
      partition), each record at most once (Firestore and Table Storage refuse two writes to
      one record in a commit), at most ``capabilities.max_commit_ops`` ops, JSON data, a Merge
      naming each field once with integer counters.
    * :class:`Merge` means :func:`apply_merge`; an adapter that merges client-side calls it.
    * A version changes on every write of the record, and versions of one key never repeat
      while the record exists (a stale writer can never match).
    * ``query`` returns records of one kind, optionally of one job, whose id starts with
      ``prefix`` and lies in ``[start, end)``, ordered by (job, id). One round trip.
    * Data values are JSON types (str, int, float, bool, None, list, dict); datetimes are
      stored as ISO text by the caller. Adapters return the data they were given.
    * Every request to the backend is one round trip: counted in :attr:`round_trips` and
      reported to the callbacks of :meth:`add_observer` (an adapter that sends a request of its
      own, e.g. a read inside a commit, reports it with :meth:`_round_trip`).

    Errors an adapter raises (and nothing else for a backend failure):

    * :class:`~cronwarden.model.errors.CommitConflict` (``index``, ``reason`` ``exists`` /
      ``version``): a precondition failed; nothing was applied.
    * :class:`~cronwarden.model.errors.StoreUnavailable`: the backend was not reached or refused
      before applying anything (connection refused, busy database, throttled); resending the
      same write is safe.
    * :class:`~cronwarden.model.errors.CommitOutcomeUnknown`: the request was sent and the answer
    was
      lost (deadline exceeded, connection reset); the commit may have applied. A subclass of
      ``StoreUnavailable``.
    * :class:`~cronwarden.model.errors.ContentRefused`: the backend cannot hold what the commit
      carries (a NUL character or a lone surrogate it refuses, a value or record past its size
      limits); nothing was applied and resending cannot help. Text is never stored changed:
      held exactly, or refused.
    """

    capabilities: StoreCapabilities = StoreCapabilities()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        legacy = cls.__dict__.get("max_commit_ops")
        if isinstance(legacy, int) and "capabilities" not in cls.__dict__:
            # an adapter written before capabilities existed: ``max_commit_ops = N``
            cls.capabilities = replace(cls.capabilities, max_commit_ops=legacy)
            del cls.max_commit_ops

    def __init__(self) -> None:
        self._rt_lock = threading.Lock()
        self.round_trips = 0
        self._observers: list[RoundTripObserver] = []

    @property
    def max_commit_ops(self) -> int:
        """``capabilities.max_commit_ops`` (kept as an attribute name of its own)."""
        return self.capabilities.max_commit_ops

    def add_observer(self, observer: RoundTripObserver) -> Callable[[], None]:
        """Call ``observer`` after every round trip to the backend; returns a function that
        removes it. Observers run on the calling thread and must not raise."""
        with self._rt_lock:
            self._observers.append(observer)

        def remove() -> None:
            with self._rt_lock:
                if observer in self._observers:
                    self._observers.remove(observer)

        return remove

    def _round_trip(self, operation: str, kind: str = "", ops: int = 0) -> None:
        """Count one request to the backend and tell the observers (adapters call this for the
        requests they send on their own)."""
        with self._rt_lock:
            self.round_trips += 1
            observers = list(self._observers)
        if observers:
            event = RoundTrip(operation, kind, ops)
            for observer in observers:
                observer(event)

    def _count(self) -> None:
        """Deprecated spelling of ``_round_trip("read")``."""
        self._round_trip("read")

    def get(self, key: Key) -> Record | None:
        check_key(key)
        self._round_trip("get", key.kind)
        return self._get(key)

    def commit(self, ops: Sequence[Op]) -> list[Version]:
        if not ops:
            return []
        check_commit(ops, self.capabilities)
        self._round_trip("commit", ops[0].key.kind, len(ops))
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
        self._round_trip("query", kind)
        return self._query(kind, job, prefix, start, end, limit)

    def query_due(self, before: int) -> list[Record]:
        """The status records due by ``before`` (epoch seconds): those whose ``due_at`` or
        ``watch_due`` (:data:`DUE_FIELDS`) is an integer ``<= before``. A record where neither
        field holds an integer is never due. Order is unspecified; every due record is returned
        (no limit).

        The watcher's one question per check. This default is correct for every store (one
        query of every status record, filtered here: as slow as reading them all); an adapter
        overrides :meth:`_query_due` with an indexed range query so that the cost follows the
        number of due records, not of jobs, and reports each request it sends as a round trip
        (``query``)."""
        return self._query_due(before)

    def _query_due(self, before: int) -> list[Record]:
        return [
            r for r in self.query(STATUS) if (due := due_of(r.data)) is not None and due <= before
        ]

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
#: the window a catch-up / backfill request follows (its predecessor in one oldest-first batch)
AFTER_ATTRIBUTE = "cw-after"


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


@dataclass(frozen=True)
class Outgoing:
    """One message of :meth:`Publisher.publish_many`: the arguments of one ``publish``."""

    body: bytes
    attributes: Mapping[str, str] | None = None
    dedup_id: str | None = None
    delay: float = 0.0


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

    def publish_many(self, messages: Sequence[Outgoing]) -> None:
        """Enqueue ``messages`` in order, each as :meth:`publish` would. This default publishes
        them one by one: after an error the earlier ones may be enqueued (publishing them all
        again is safe with dedup ids). Brokers that can enqueue a batch at once override it
        (e.g. one statement, all or nothing)."""
        for m in messages:
            self.publish(m.body, attributes=m.attributes, dedup_id=m.dedup_id, delay=m.delay)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Idempotent."""


class Consumer(abc.ABC):
    """The role of a pull worker: receive deliveries and settle each one exactly once.

    A received message is invisible to other receivers for ``visibility`` seconds, or until
    settled. Unsettled, it is delivered again with ``attempt`` + 1. ``ack`` removes it,
    ``retry(delay)`` makes it visible again after about ``delay``, ``dead_letter(reason)`` moves
    it to the dead-letter queue with the reason. Hosts whose platform settles for them (a push
    endpoint, a Functions trigger) do not implement this role: they apply a
    :class:`~cronwarden.model.settlement.Verdict` in their own way.
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

    def dlq_remove(self, message_ids: Sequence[str]) -> int:
        """Remove the dead letters whose ``message_id`` (as :meth:`dlq_peek` gives it) is in
        ``message_ids``, and no other; returns how many were removed. Used once their windows
        are recorded elsewhere (``cronwarden migrate``). A broker binding that cannot remove
        single letters raises :class:`NotImplementedError` (nothing removed), so a caller says
        the queue was not drained rather than pretending it was."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot remove single dead letters; drain them by hand"
        )


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
