"""The per-item ledger of one run: which items are done, pending or quarantined, and the marks
(store ops) that record their progress.

The ledger decides; it never writes. :meth:`Ledger.claim` turns a batch of items into the
items to yield and the marks to commit (the caller commits them through the lease, fenced,
together with the *done* marks of the previous batch); :meth:`Ledger.take_final` gives the
marks left for the completion commit.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from .errors import FingerprintMismatch
from .model import fingerprint
from .ports import ITEM, Merge, Op, Record, Store
from .records import ItemRecord, item_key_of, item_state

T = TypeVar("T")
MAX_ITEM_KEY_CHARS = 200

PENDING, DONE, RELEASED, QUARANTINED = "pending", "done", "released", "quarantined"


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


def idempotency_key(run_key: str, item_key: str) -> str:
    """A stable key for ``item_key`` of ``run_key``, the same on every attempt and worker."""
    digest = hashlib.sha256(f"{run_key}\x1f{item_key}".encode()).hexdigest()[:32]
    return f"cw-{digest}"


@dataclass(frozen=True)
class Claimed(Generic[T]):
    """What :meth:`Ledger.claim` decided for one batch."""

    todo: list[tuple[LedgerItem[T], str]]  #: items to yield, with their fingerprints
    marks: list[Op]  #: *pending* / *quarantined* marks of this batch


class Ledger:
    """Item states of one run (``known``: from earlier attempts), the pending marks and the
    per-run checks (a key appears once per run; a key keeps its input)."""

    def __init__(
        self,
        *,
        job: str,
        window: str,
        run_key: str,
        run_id: str,
        batch_size: int,
        uncertain: Uncertain = Uncertain.REDO,
        retention: timedelta = timedelta(days=30),
        clock: Callable[[], datetime] | None = None,
        known: dict[str, ItemRecord] | None = None,
    ) -> None:
        self.job, self.window, self.run_key, self.run_id = job, window, run_key, run_id
        self.batch_size = batch_size
        self.uncertain = uncertain
        self.retention = retention
        self._clock = clock
        self.known: dict[str, ItemRecord] = known or {}
        self.completed: list[tuple[str, str]] = []  #: (key, fingerprint) done, not yet written
        self.unstarted: list[tuple[str, str]] = []  #: claimed pending, not yet yielded
        self.seen_in_run: set[str] = set()

    def load(self, store: Store) -> None:
        """Read what earlier attempts of this run recorded (one query)."""
        self.known.update(_known(store.query(ITEM, self.job, prefix=f"{self.window}/")))

    # -- deciding ---------------------------------------------------------------------------
    def claim(
        self,
        batch: Iterable[T],
        key_of: Callable[[T], Any],
        fingerprint_of: Callable[[T], Any] | None,
        count: Callable[[str], None],
        on_quarantine: Callable[[str], None],
    ) -> Claimed[T]:
        """Decide, for each item of ``batch``, whether to yield it and which mark to write;
        ``count(name)`` as each item is judged (skipped done, uncertain, quarantined) and
        ``on_quarantine(key)`` for each item this batch quarantines.

        Raises ``ValueError`` for a key seen twice in the run and
        :class:`~cronwarden.errors.FingerprintMismatch` for a key whose input changed.
        """
        todo: list[tuple[LedgerItem[T], str]] = []
        marks: list[Op] = []
        for value in batch:
            item_key = valid_key(key_of(value))
            if item_key in self.seen_in_run:
                raise ValueError(f"item key {item_key!r} appears twice in one run")
            self.seen_in_run.add(item_key)
            fp = fingerprint(fingerprint_of(value) if fingerprint_of else value)
            known = self.known.get(item_key)
            uncertain = False
            if known is not None:
                if known.fingerprint != fp:
                    raise FingerprintMismatch(
                        f"item {item_key!r} of {self.run_key} was first processed with "
                        "different input"
                    )
                if known.state == DONE:
                    count("items_skipped_done")
                    continue
                if known.state == RELEASED:
                    known = None
                elif known.state == QUARANTINED:
                    count("items_quarantined")
                    continue
                elif known.run_id != self.run_id:
                    uncertain = True
                    if self.uncertain is Uncertain.QUARANTINE:
                        count("items_quarantined")
                        on_quarantine(item_key)
                        marks.append(self._mark(item_key, fp, QUARANTINED))
                        continue
                    count("items_uncertain")
            marks.append(self._mark(item_key, fp, PENDING))
            item = LedgerItem(item_key, value, idempotency_key(self.run_key, item_key), uncertain)
            todo.append((item, fp))
        return Claimed(todo, marks)

    # -- marks ------------------------------------------------------------------------------
    def _mark(self, item_key: str, fp: str, state: str) -> Op:
        """A whole item record: the item's first mark in this run."""
        expires = None if self._clock is None else self._clock() + self.retention
        record = ItemRecord(item_key, fp, state, self.run_id, expires)
        return Merge(item_key_of(self.job, self.window, item_key), record.to_data())

    def _state_mark(self, item_key: str, state: str) -> Op:
        """Only the new state: this run's *pending* mark of the item, committed before the
        item was yielded, already holds its key, fingerprint, run id and expiry."""
        return Merge(item_key_of(self.job, self.window, item_key), item_state(state))

    def take_done(self) -> list[Op]:
        """*done* marks of the items finished since the last write (now known as done)."""
        marks = [self._state_mark(k, DONE) for k, _ in self.completed]
        for k, fp in self.completed:
            self.known[k] = ItemRecord(k, fp, DONE, self.run_id)
        self.completed = []
        return marks

    def take_final(self) -> list[Op]:
        """Marks not yet written, for the final commit: *done* for finished items, *released*
        for items claimed but never started (they are not uncertain: nothing happened)."""
        released = [self._state_mark(k, RELEASED) for k, _ in self.unstarted]
        self.unstarted = []
        return self.take_done() + released


def _known(records: Iterable[Record]) -> dict[str, ItemRecord]:
    items = (ItemRecord.from_data(record.data) for record in records)
    return {item.key: item for item in items}


def key_function(key: Callable[[Any], Any] | str | None) -> Callable[[Any], Any]:
    """An item's key: a function of the item, an attribute/dict-key name, or ``str(item)``."""
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


def valid_key(raw: Any) -> str:
    text = str(raw)
    if not text:
        raise ValueError("item keys must not be empty")
    if len(text) > MAX_ITEM_KEY_CHARS:
        raise ValueError(f"item key {text[:40]!r}… is over {MAX_ITEM_KEY_CHARS} characters")
    return text
