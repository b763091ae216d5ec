"""The per-item ledger of one run: which items are done, pending or quarantined, and the marks
(store ops) that record their progress.

The ledger decides; it never writes. :meth:`Ledger.claim` turns a batch of items into the
items to yield and the marks to commit (the caller commits them through the lease, fenced,
together with the marks still owed: :meth:`Ledger.outgoing`); :meth:`Ledger.take_final` gives
the marks left for the completion (or failure) commit.

Durability rule: a mark is forgotten only once the store acknowledged the write carrying it
(:meth:`Ledger.acknowledge`). A write that failed leaves its *done* / *released* marks owed, so
they ride on the next write, the failure and completion commits included.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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


@dataclass(eq=False)
class Loop:
    """One ``ctx.items()`` loop: the items it claimed and has not yielded yet. When the loop
    ends early (break, an exception, a failed write) these are released, never left pending."""

    unstarted: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Outgoing:
    """Marks owed to the store, as handed to one write (see :meth:`Ledger.acknowledge`)."""

    ops: list[Op]
    done: int  #: how many of ``Ledger.completed`` they cover
    released: int  #: how many of ``Ledger.released`` they cover


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
        self.released: list[tuple[str, str]] = []  #: never started, release not yet written
        self.loops: list[Loop] = []  #: open ``ctx.items()`` loops
        self.quarantined: list[str] = []  #: items of this window quarantined (new or known)
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
                    self.quarantined.append(item_key)
                    continue
                elif known.run_id != self.run_id:
                    uncertain = True
                    if self.uncertain is Uncertain.QUARANTINE:
                        count("items_quarantined")
                        on_quarantine(item_key)
                        self.quarantined.append(item_key)
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

    # -- loops ------------------------------------------------------------------------------
    @property
    def unstarted(self) -> list[tuple[str, str]]:
        """Claimed, not yet yielded, in every open loop (deprecated single-loop view)."""
        return [entry for loop in self.loops for entry in loop.unstarted]

    def open_loop(self) -> Loop:
        loop = Loop()
        self.loops.append(loop)
        return loop

    def close_loop(self, loop: Loop) -> None:
        """The loop ended: its never-started items are owed a *released* mark."""
        self.released.extend(loop.unstarted)
        loop.unstarted = []
        if loop in self.loops:
            self.loops.remove(loop)

    # -- owed marks ---------------------------------------------------------------------------
    def outgoing(self) -> Outgoing:
        """The marks owed now (*done* of finished items, *released* of never-started ones),
        for one write; they stay owed until :meth:`acknowledge`."""
        done = [self._state_mark(k, DONE) for k, _ in self.completed]
        # a release is a whole record: the pending mark it replaces may never have landed
        released = [self._mark(k, fp, RELEASED) for k, fp in self.released]
        return Outgoing([*done, *released], len(self.completed), len(self.released))

    def acknowledge(self, sent: Outgoing) -> None:
        """The store acknowledged the write that carried ``sent``: forget those marks."""
        for k, fp in self.completed[: sent.done]:
            self.known[k] = ItemRecord(k, fp, DONE, self.run_id)
        for k, fp in self.released[: sent.released]:
            self.known[k] = ItemRecord(k, fp, RELEASED, self.run_id)
        del self.completed[: sent.done]
        del self.released[: sent.released]

    def take_done(self) -> list[Op]:
        """Deprecated: forgets the marks before any write acknowledged them (use
        :meth:`outgoing` and :meth:`acknowledge`)."""
        sent = self.outgoing()
        self.acknowledge(sent)
        return sent.ops

    def final(self) -> Outgoing:
        """Every mark owed, for the run's last commit: open loops end here (their
        never-started items are released, not left pending: nothing happened to them)."""
        for loop in list(self.loops):
            self.close_loop(loop)
        return self.outgoing()

    def take_final(self) -> list[Op]:
        """Deprecated spelling of :meth:`final` that forgets the marks at once."""
        sent = self.final()
        self.acknowledge(sent)
        return sent.ops


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


def quarantined_text(job: str, quarantined: dict[str, list[str]], *, shown: int = 10) -> str:
    """The ``quarantined`` alert: which items of which windows wait for an operator."""
    total = sum(len(keys) for keys in quarantined.values())
    parts = []
    for window, keys in sorted(quarantined.items()):
        listed = ", ".join(keys[:shown]) + (
            f" (+{len(keys) - shown} more)" if len(keys) > shown else ""
        )
        parts.append(f"{window}: {listed}")
    return (
        f"{job} quarantined: {total} ledger item(s) were left pending by an owner that died "
        f"mid-item and were skipped ({'; '.join(parts)}). First check: did their side effect "
        f"happen? Then `cronwarden ledger resolve {job} --window W ITEM… --as done|redo "
        "--reason …`."
    )
