"""What a handler receives: the run's identity, checkpoints, the per-item ledger, cancellation.

Handlers are plain functions of one argument::

    def nightly_export(ctx: RunContext) -> None:
        for item in ctx.items(customers(), key=lambda c: c["id"]):
            mail.send(item.value, idempotency_key=item.idempotency_key)

Every write ``ctx`` makes is fenced (see :mod:`cronwarden.lease`): once another worker has taken
the run over, the next ``ctx`` call raises :class:`~cronwarden.errors.LeaseLost`.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import FingerprintMismatch
from .model import fingerprint
from .ports import ITEM, Key, Merge, Op

if TYPE_CHECKING:
    from .jobs import Job
    from .lease import Lease
    from .logs import RunLogger

T = TypeVar("T")
MAX_CHECKPOINT_BYTES = 32 * 1024
MAX_ITEM_KEY_CHARS = 200


class Uncertain(enum.StrEnum):
    """What to do with items a dead owner left *pending*: their side effect may have happened."""

    REDO = "redo"  #: yield them again (flagged ``uncertain``); pass the idempotency key on
    QUARANTINE = "quarantine"  #: skip them and record them for a human to check


@dataclass(frozen=True)
class LedgerItem(Generic[T]):
    """One item of a fan-out, with the key that makes its side effect idempotent downstream."""

    key: str
    value: T
    idempotency_key: str  #: stable across attempts and workers: pass it to payment/mail APIs
    uncertain: bool = False  #: a previous owner started this item and died before marking it


@dataclass
class _Known:
    state: str
    fingerprint: str
    run_id: str


class Ledger:
    """Item states of one run, the pending "done" marks, and the counters."""

    def __init__(self, known: dict[str, _Known] | None = None) -> None:
        self.known = known or {}
        self.completed: list[tuple[str, str]] = []  #: (key, fingerprint) done, not yet written
        self.unstarted: list[tuple[str, str]] = []  #: claimed pending, not yet yielded
        self.seen_in_run: set[str] = set()

    @classmethod
    def from_records(cls, records: Iterable[Any]) -> Ledger:
        known = {}
        for record in records:
            data = record.data
            known[str(data.get("key"))] = _Known(
                str(data.get("state")), str(data.get("fp")), str(data.get("run_id"))
            )
        return cls(known)


class RunContext:
    """The handler's view of one run. Not thread-safe: use it from the handler's thread."""

    def __init__(
        self,
        *,
        job: Job,
        window: datetime,
        run_key: str,
        run_id: str,
        attempt: int,
        fence: int,
        payload: dict[str, Any],
        checkpoint: Any,
        log: RunLogger,
        lease: Lease,
        ledger: Ledger,
        batch_size: int,
        uncertain: Uncertain,
        now: Callable[[], datetime],
        retention: timedelta,
        item_record: Callable[[str, dict[str, Any]], dict[str, Any]],
    ) -> None:
        self.job = job
        self.window = window
        self.run_key = run_key
        self.run_id = run_id
        self.attempt = attempt
        self.fence = fence
        self.payload = payload
        self.log = log
        self.counters: dict[str, int] = {}
        self._checkpoint = checkpoint
        self._lease = lease
        self._ledger = ledger
        self._batch_size = batch_size
        self._uncertain = uncertain
        self._now = now
        self._item_record = item_record
        self._window_text = run_key.split(":", 1)[1]

    # -- identity ---------------------------------------------------------------------------
    @property
    def resumed(self) -> bool:
        """True when an earlier attempt of this run key ran (its checkpoint/ledger carry over)."""
        return self.fence > 1

    def idempotency_key(self, item_key: str) -> str:
        """A stable key for ``item_key`` in this window, the same on every attempt and worker."""
        digest = hashlib.sha256(f"{self.run_key}\x1f{item_key}".encode()).hexdigest()[:32]
        return f"cw-{digest}"

    # -- cancellation -----------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        return self._lease.interruption is not None

    def check(self) -> None:
        """Raise :class:`~cronwarden.errors.LeaseLost` / ``Cancelled`` if the run must stop."""
        self._lease.check()

    def sleep(self, seconds: float) -> None:
        """Sleep, waking early (and raising) when the run is asked to stop."""
        self._lease.stop_event.wait(max(0.0, seconds))
        self.check()

    def count(self, name: str, amount: int = 1) -> None:
        """Add to a counter reported with the run's completion."""
        self.counters[name] = self.counters.get(name, 0) + amount

    # -- checkpoints ------------------------------------------------------------------------
    @property
    def checkpoint(self) -> Any:
        """The last saved checkpoint of this run key (from an earlier attempt too), or None."""
        return self._checkpoint

    def save_checkpoint(self, value: Any) -> None:
        """Durably save a JSON-serialisable checkpoint (one fenced write)."""
        self.check()
        encoded = json.dumps(value)
        if len(encoded.encode()) > MAX_CHECKPOINT_BYTES:
            raise ValueError(f"checkpoint is over {MAX_CHECKPOINT_BYTES} bytes; store a pointer")
        self._lease.write({"checkpoint": json.loads(encoded)}, self._flush_completed())
        self._checkpoint = value

    # -- the ledger -------------------------------------------------------------------------
    def items(
        self,
        iterable: Iterable[T],
        *,
        key: Callable[[T], Any] | str | None = None,
        fingerprint_of: Callable[[T], Any] | None = None,
        batch_size: int | None = None,
    ) -> Iterator[LedgerItem[T]]:
        """Iterate ``iterable`` with at-most-once per item, resuming across attempts.

        Items are claimed in batches (one fenced write marks a batch *pending* and the previous
        one *done*); an item counts as done once the loop moves past it. Items done by an
        earlier attempt are not yielded again. Items a dead owner left pending are *uncertain*:
        yielded again with ``uncertain=True`` (default) or quarantined. Reusing a key with a
        different value (by ``fingerprint_of``, default: the value itself) raises
        :class:`~cronwarden.errors.FingerprintMismatch`.

        ``key``: a function of the item, an attribute/dict-key name, or None for ``str(item)``.
        """
        size = min(batch_size or self._batch_size, self._batch_size)
        if size < 1:
            raise ValueError("batch_size must be at least 1")
        key_of = _key_function(key)
        iterator = iter(iterable)
        while batch := list(islice(iterator, size)):
            self.check()
            todo: list[tuple[LedgerItem[T], str]] = []
            marks: list[Op] = []
            for value in batch:
                item_key = _valid_key(key_of(value))
                if item_key in self._ledger.seen_in_run:
                    raise ValueError(f"item key {item_key!r} appears twice in one run")
                self._ledger.seen_in_run.add(item_key)
                fp = fingerprint(fingerprint_of(value) if fingerprint_of else value)
                known = self._ledger.known.get(item_key)
                uncertain = False
                if known is not None:
                    if known.fingerprint != fp:
                        raise FingerprintMismatch(
                            f"item {item_key!r} of {self.run_key} was first processed with "
                            "different input"
                        )
                    if known.state == "done":
                        self.count("items_skipped_done")
                        continue
                    if known.state == "released":
                        known = None
                    elif known.state == "quarantined":
                        self.count("items_quarantined")
                        continue
                    elif known.run_id != self.run_id:
                        uncertain = True
                        if self._uncertain is Uncertain.QUARANTINE:
                            self.count("items_quarantined")
                            self.log.warning(
                                "item %s was left pending by a previous owner; quarantined",
                                item_key,
                                extra={"event": "ledger.quarantined", "item": item_key},
                            )
                            marks.append(self._mark(item_key, fp, "quarantined"))
                            continue
                        self.count("items_uncertain")
                marks.append(self._mark(item_key, fp, "pending"))
                item = LedgerItem(item_key, value, self.idempotency_key(item_key), uncertain)
                todo.append((item, fp))
            if not marks:
                continue
            self._lease.write({}, self._flush_completed() + marks)
            self._ledger.unstarted = [(ready.key, fp) for ready, fp in todo]
            for ready, fp in todo:
                self.check()
                self._ledger.unstarted.pop(0)
                yield ready
                self._ledger.completed.append((ready.key, fp))
                self.count("items_done")

    def _item_key(self, item_key: str) -> Key:
        return Key(ITEM, self.job.name, f"{self._window_text}/{item_key}")

    def _mark(self, item_key: str, fp: str, state: str) -> Op:
        data = {"key": item_key, "fp": fp, "state": state, "run_id": self.run_id}
        return Merge(self._item_key(item_key), self._item_record(item_key, data))

    def _state_mark(self, item_key: str, state: str) -> Op:
        """Only the new state: this run's *pending* mark of the item, committed before the
        item was yielded, already holds its key, fingerprint, run id and expiry."""
        return Merge(self._item_key(item_key), {"state": state})

    def _flush_completed(self) -> list[Op]:
        marks = [self._state_mark(k, "done") for k, _ in self._ledger.completed]
        for k, fp in self._ledger.completed:
            self._ledger.known[k] = _Known("done", fp, self.run_id)
        self._ledger.completed = []
        return marks

    def take_completed(self) -> list[Op]:
        """Marks not yet written, for the final commit: *done* for finished items, *released*
        for items claimed but never started (they are not uncertain: nothing happened)."""
        released = [self._state_mark(k, "released") for k, _ in self._ledger.unstarted]
        self._ledger.unstarted = []
        return self._flush_completed() + released


def _key_function(key: Callable[[Any], Any] | str | None) -> Callable[[Any], Any]:
    if key is None:
        return str
    if callable(key):
        return key
    name = key

    def by_name(value: Any) -> Any:
        if isinstance(value, dict):
            return value[name]
        return getattr(value, name)

    return by_name


def _valid_key(raw: Any) -> str:
    text = str(raw)
    if not text:
        raise ValueError("item keys must not be empty")
    if len(text) > MAX_ITEM_KEY_CHARS:
        raise ValueError(f"item key {text[:40]!r}… is over {MAX_ITEM_KEY_CHARS} characters")
    return text
