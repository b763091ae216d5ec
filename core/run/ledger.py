"""The per-item ledger of one run: which items are done, pending or quarantined, and the marks
(store ops) that record their progress.

The ledger decides; it never writes. :meth:`Ledger.claim` turns a batch of items into the
items to yield and one new *page* (:class:`~cronwarden.model.records.ItemPage`: the batch's keys,
fingerprints and states in one record; several when it would exceed the store's
``max_page_bytes``); :meth:`Ledger.outgoing` gives every mark owed (new pages written whole,
pages whose states changed since the store last acknowledged them as a ``states`` update, or
carried inside the new page of the same write) for the caller to commit through the lease,
fenced (:meth:`~cronwarden.run.lease.Lease.mark`); :meth:`Ledger.final` gives the marks left for
the completion (or failure) commit. A batch of N items thus costs one record write: its page,
which also carries the previous batch's *done* marks (the last batch's ride on the completion),
on every store.

Group commit: within a batch, *done* marks are not left waiting for the next batch. Once the
items finished since the run's last ledger write took :attr:`Ledger.flush_every` seconds, not
counting the longest of them, the marks owed are written at once (one fenced
:meth:`~cronwarden.run.lease.Lease.mark`: the page's ``states``), before the next item starts
(:meth:`cronwarden.run.context.RunContext.items`). Quick items thus share a write (a batch of
them costs one page write, as before, even when the process is descheduled once: the longest
gap does not count), slow ones are durable every second item, items of 250 ms or more each at
once: after a SIGKILL or a paused owner, at most the item in flight, the longest one finished
since the last write and items taking under ``flush_every`` in all are re-run (flagged
uncertain, with their idempotency keys; items of 5 ms or more: at most 2).
``flush_every=None`` writes *done* marks only with the next batch's page (fewer writes, up to a
batch re-run).

Durability rule: a mark is forgotten only once the store acknowledged the write carrying it
(:meth:`Ledger.acknowledge`). A write that failed leaves its pages owed, so they ride on the
next write, the failure and completion commits included. A page whose first write was never
acknowledged is written whole again (its *pending* mark may never have landed).

Reading (:meth:`Ledger.load`, :func:`read_items`): one query of the window's ``item`` records,
pages and the per-item records of operators' resolutions and of versions before pages alike;
an item mentioned by several takes the state of the highest rank (a later owner's page, then a
resolution).
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import repeat
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..model.errors import ContentRefused, FingerprintMismatch
from ..model.ports import ITEM, Key, Merge, Op, Record, Store
from ..model.records import (
    CARRIED,
    PAGE_TAG,
    STATE_CODES,
    ItemPage,
    ItemRecord,
    carried_states,
    is_page,
    item_key_of,
    item_rank,
    page_key_of,
)
from ..model.runs import fingerprint
from ..model.text import storable, unstorable

T = TypeVar("T")
MAX_ITEM_KEY_CHARS = 200
#: bytes one item can take in a page's JSON at worst (a 200-character key of escaped
#: astral characters, its fingerprint, separators): bounds the pages a batch needs
WORST_ITEM_BYTES = MAX_ITEM_KEY_CHARS * 12 + 64
_PAGE_OVERHEAD = 256  #: a page's fields other than keys, fingerprints and states

PENDING, DONE, RELEASED, QUARANTINED = "pending", "done", "released", "quarantined"
_P, _D, _R, _Q = (STATE_CODES[s] for s in (PENDING, DONE, RELEASED, QUARANTINED))
DONE_CODE = _D  #: an item's state code in :attr:`Page.states` once it is done
#: seconds of finished items between the group commits of *done* marks inside a batch (the
#: default of :attr:`Ledger.flush_every`): after a crash at most the item in flight and the
#: items done in about the last interval are re-run
FLUSH_EVERY = 0.005


class Uncertain(enum.StrEnum):
    """What to do with items a dead owner left *pending*: their side effect may have happened."""

    REDO = "redo"  #: yield them again (flagged ``uncertain``); pass the idempotency key on
    QUARANTINE = "quarantine"  #: skip them and record them for a human to check

    @classmethod
    def of(cls, value: object) -> Uncertain:
        """``value`` (a member, or its value in any case: ``"Quarantine"``) as a member;
        ``ValueError`` naming the choices for anything else (never a silent ``redo``)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls(value.strip().lower())
            except ValueError:
                pass
        choices = ", ".join(repr(member.value) for member in cls)
        raise ValueError(f"uncertain must be one of {choices} (or Uncertain.*), got {value!r}")


@dataclass(frozen=True)
class LedgerItem(Generic[T]):
    """One item of a fan-out, with the key that makes its side effect idempotent downstream."""

    key: str
    value: T
    idempotency_key: str  #: stable across attempts and workers: pass it to payment/mail APIs
    uncertain: bool = False  #: a previous owner started this item and died before marking it

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # items the ledger makes compute their idempotency key on first use (a digest
            # per item that a handler may never need)
            run_key = self.__dict__.get("_run_key")
            if name != "idempotency_key" or run_key is None:
                raise AttributeError(name)
            value = idempotency_key(run_key, self.key)
            self.__dict__[name] = value
            return value


def _new_item(key: str, value: T, run_key: str, uncertain: bool) -> LedgerItem[T]:
    """``LedgerItem(key, value, idempotency_key(run_key, key), uncertain)``, the key computed
    on first use, without the frozen dataclass's per-field ``object.__setattr__`` (the ledger
    makes one per item)."""
    item: LedgerItem[T] = object.__new__(LedgerItem)
    fields = item.__dict__
    fields["key"] = key
    fields["value"] = value
    fields["_run_key"] = run_key
    fields["uncertain"] = uncertain
    return item


def idempotency_key(run_key: str, item_key: str) -> str:
    """A stable key for ``item_key`` of ``run_key``, the same on every attempt and worker."""
    digest = hashlib.sha256(f"{run_key}\x1f{item_key}".encode()).hexdigest()[:32]
    return f"cw-{digest}"


@dataclass(eq=False)
class Page:
    """One page this owner writes: its items' states (codes) as they are now, and as the
    store last acknowledged them (``stored``: None until the write creating it is)."""

    key: Key
    fence: int
    seq: int
    keys: list[str]
    fps: list[str]
    states: list[str]
    expire_at: datetime | None
    stored: str | None = None
    size: int = 0  #: bytes its record takes at most, as written whole (``carried`` aside)


@dataclass(eq=False)
class Loop:
    """One ``ctx.items()`` loop: the items it claimed, ``started`` of them yielded. When the
    loop ends early (break, an exception, a failed write) the rest are released, never left
    pending."""

    claimed: list[tuple[Page, int]] = field(default_factory=list)
    started: int = 0

    @property
    def unstarted(self) -> list[tuple[str, str]]:
        """``(key, fingerprint)`` of the claimed items not yielded yet."""
        return [(page.keys[i], page.fps[i]) for page, i in self.claimed[self.started :]]


@dataclass(frozen=True)
class Outgoing:
    """Marks owed to the store, as handed to one write (see :meth:`Ledger.acknowledge`)."""

    ops: list[Op]
    pages: list[tuple[Page, str]] = field(default_factory=list)  #: (page, states sent)

    @property
    def done(self) -> int:
        """How many *done* marks the write carries."""
        return sum(states.count(_D) for _, states in self.pages)

    @property
    def released(self) -> int:
        """How many *released* marks the write carries."""
        return sum(states.count(_R) for _, states in self.pages)


@dataclass(frozen=True)
class Claimed(Generic[T]):
    """What :meth:`Ledger.claim` decided for one batch."""

    todo: list[tuple[LedgerItem[T], str]]  #: items to yield, with their fingerprints
    marks: list[Op]  #: the new pages' records (also owed through :meth:`Ledger.outgoing`)
    slots: list[tuple[Page, int]] = field(default_factory=list)  #: where ``todo`` are marked


class Ledger:
    """Item states of one run (``known``: from earlier attempts), the pages this owner writes
    and the per-run checks (a key appears once per run; a key keeps its input)."""

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
        fence: int = 0,
        max_page_bytes: int = 256_000,
        flush_every: float | None = FLUSH_EVERY,
    ) -> None:
        self.job, self.window, self.run_key, self.run_id = job, window, run_key, run_id
        self.batch_size = batch_size
        #: seconds of items finished (the longest aside) after which the *done* marks owed are
        #: written within a batch (a fenced group commit); None: only with the next batch's page
        self.flush_every = flush_every
        self.uncertain = Uncertain.of(uncertain)  # compared by identity in claim()
        self.retention = retention
        self._clock = clock
        self.fence = fence
        self.max_page_bytes = max(max_page_bytes, _PAGE_OVERHEAD + WORST_ITEM_BYTES)
        self.known: dict[str, ItemRecord] = known or {}
        self.pages: list[Page] = []  #: this owner's pages with marks owed or still to come
        self.loops: list[Loop] = []  #: open ``ctx.items()`` loops
        self.quarantined: list[str] = []  #: items of this window quarantined (new or known)
        self.seen_in_run: set[str] = set()
        self._seq = 0

    def load(self, store: Store) -> None:
        """Read what earlier attempts of this run recorded (one query)."""
        found = read_items(store.query(ITEM, self.job, prefix=f"{self.window}/"))
        self.known.update({key: view.item for key, view in found.items()})

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
        ``on_quarantine(key)`` for each item this batch quarantines. The marks go into new
        pages, owed from now on (:meth:`outgoing`).

        Raises ``ValueError`` for a key seen twice in the run and
        :class:`~cronwarden.model.errors.FingerprintMismatch` for a key whose input changed.
        """
        todo: list[tuple[LedgerItem[T], str]] = []
        keys: list[str] = []  #: the marks to write, as columns: keys, fingerprints, states
        fps: list[str] = []
        codes: list[str] = []
        yielded: list[int] = []  #: the index in the columns of each item of ``todo``
        seen = self.seen_in_run
        known_items = self.known
        run_key = self.run_key
        for value in batch:
            item_key = key_of(value)
            if (
                type(item_key) is not str
                or not 0 < len(item_key) <= MAX_ITEM_KEY_CHARS
                or item_key.startswith(PAGE_TAG)
                or unstorable(item_key)
            ):
                item_key = valid_key(item_key)  # raises for a key it refuses
            if item_key in seen:
                raise ValueError(f"item key {item_key!r} appears twice in one run")
            seen.add(item_key)
            fp = fingerprint(fingerprint_of(value) if fingerprint_of else value)
            uncertain = False
            if known_items:
                known = known_items.get(item_key)
                if known is not None:
                    if known.fingerprint != fp:
                        raise FingerprintMismatch(
                            f"item {item_key!r} of {self.run_key} was first processed with "
                            "different input"
                        )
                    if known.state == DONE:
                        count("items_skipped_done")
                        continue
                    if known.state == QUARANTINED:
                        count("items_quarantined")
                        self.quarantined.append(item_key)
                        continue
                    if known.state != RELEASED and known.run_id != self.run_id:
                        uncertain = True
                        if self.uncertain is Uncertain.QUARANTINE:
                            count("items_quarantined")
                            on_quarantine(item_key)
                            self.quarantined.append(item_key)
                            keys.append(item_key)
                            fps.append(fp)
                            codes.append(_Q)
                            continue
                        count("items_uncertain")
            yielded.append(len(keys))
            keys.append(item_key)
            fps.append(fp)
            codes.append(_P)
            todo.append((_new_item(item_key, value, run_key, uncertain), fp))
        if not keys:
            return Claimed(todo, [], [])
        pages = self._paginate(keys, fps, codes)
        if len(pages) == 1:
            slots = list(zip(repeat(pages[0]), yielded))
        else:
            where = [(page, i) for page in pages for i in range(len(page.keys))]
            slots = [where[i] for i in yielded]
        marks: list[Op] = [Merge(p.key, self._data(p, "".join(p.states))) for p in pages]
        return Claimed(todo, marks, slots)

    def _paginate(self, keys: list[str], fps: list[str], codes: list[str]) -> list[Page]:
        """New pages holding these marks, in order, as few as fit ``max_page_bytes``."""
        expires = None if self._clock is None else self._clock() + self.retention
        limit = self.max_page_bytes - _PAGE_OVERHEAD
        text = "".join(keys)
        if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
            # plain keys (the usual case): each costs its length, its fingerprint's and 8
            # bytes of quotes, commas and its state code
            costs = [len(k) + len(f) + 8 for k, f in zip(keys, fps, strict=True)]
        else:
            costs = [len(json.dumps(k)) + len(f) + 8 for k, f in zip(keys, fps, strict=True)]
        pages: list[Page] = []
        start, size = 0, 0
        for end, cost in enumerate(costs):
            if end > start and size + cost > limit:
                pages.append(
                    self._page(keys[start:end], fps[start:end], codes[start:end], expires, size)
                )
                start, size = end, 0
            size += cost
        if start == 0:
            pages.append(self._page(keys, fps, codes, expires, size))
        else:
            pages.append(self._page(keys[start:], fps[start:], codes[start:], expires, size))
        return pages

    def _page(
        self,
        keys: list[str],
        fps: list[str],
        codes: list[str],
        expires: datetime | None,
        size: int,
    ) -> Page:
        key = page_key_of(self.job, self.window, self.fence, self._seq)
        page = Page(key, self.fence, self._seq, keys, fps, codes, expires)
        page.size = size + _PAGE_OVERHEAD
        self._seq += 1
        self.pages.append(page)
        return page

    def _data(self, page: Page, states: str) -> dict[str, Any]:
        record = ItemPage(
            page.fence, page.seq, self.run_id, page.keys, page.fps, states, page.expire_at
        )
        return record.to_data()

    # -- marks ------------------------------------------------------------------------------
    def mark_done(self, slot: tuple[Page, int]) -> None:
        """The item at ``slot`` (of :attr:`Claimed.slots`) is done; owed until acknowledged."""
        page, index = slot
        page.states[index] = _D

    @property
    def completed(self) -> list[tuple[str, str]]:
        """Deprecated view: ``(key, fingerprint)`` of items done whose mark is still owed."""
        done = []
        for page in self.pages:
            stored = page.stored or ""
            for i, code in enumerate(page.states):
                if code == _D and (i >= len(stored) or stored[i] != _D):
                    done.append((page.keys[i], page.fps[i]))
        return done

    @property
    def released(self) -> list[tuple[str, str]]:
        """Deprecated view: ``(key, fingerprint)`` of released items whose mark is owed."""
        out = []
        for page in self.pages:
            stored = page.stored or ""
            for i, code in enumerate(page.states):
                if code == _R and (i >= len(stored) or stored[i] != _R):
                    out.append((page.keys[i], page.fps[i]))
        return out

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
        for page, index in loop.claimed[loop.started :]:
            if page.states[index] == _P:
                page.states[index] = _R
        loop.claimed, loop.started = [], 0
        if loop in self.loops:
            self.loops.remove(loop)

    # -- owed marks ---------------------------------------------------------------------------
    def outgoing(self) -> Outgoing:
        """The marks owed now, for one write: each page never acknowledged, whole; each page
        whose states changed since, its ``states``. They stay owed until :meth:`acknowledge`.

        When the write creates a page, the states updates of this owner's earlier pages ride
        in it (its ``carried`` field) instead of in records of their own: a batch then costs
        one record write (its page, carrying the previous batch's *done* marks), not two."""
        ops: list[Op] = []
        sent: list[tuple[Page, str]] = []
        updates: list[tuple[Page, str]] = []  #: pages stored before, whose states changed
        created: list[tuple[Page, str]] = []  #: pages never acknowledged, written whole
        for page in self.pages:
            states = "".join(page.states)
            if states == page.stored:
                continue
            (created if page.stored is None else updates).append((page, states))
        if created and updates:
            carrier, carrier_states = created[-1]
            room = self.max_page_bytes - carrier.size
            carried: dict[str, str] = {}
            for page, states in updates:
                cost = len(states) + 16  #: its seq, quotes and separators
                if cost <= room:
                    carried[str(page.seq)] = states
                    room -= cost
                else:  # over the page size: a states update of its own
                    ops.append(Merge(page.key, {"states": states}))
            data = self._data(carrier, carrier_states)
            if carried:
                data[CARRIED] = carried
            ops += [Merge(p.key, self._data(p, st)) for p, st in created[:-1]]
            ops.append(Merge(carrier.key, data))
        else:
            ops += [Merge(p.key, {"states": st}) for p, st in updates]
            ops += [Merge(p.key, self._data(p, st)) for p, st in created]
        sent += updates
        sent += created
        return Outgoing(ops, sent)

    def acknowledge(self, sent: Outgoing) -> None:
        """The store acknowledged the write that carried ``sent``: forget those marks (a page
        is dropped once every item of it is settled and stored)."""
        if not sent.pages:
            return
        for page, states in sent.pages:
            page.stored = states
        self.pages = [
            page for page in self.pages if page.stored != "".join(page.states) or _P in page.states
        ]

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


@dataclass(frozen=True)
class ItemView:
    """One item as the ledger reads it: its state (from the record of highest rank), that
    rank, and the item's own record if it has one (a resolution, or a mark written before
    pages), with the resolution it carries."""

    item: ItemRecord
    rank: tuple[int, int, int]
    own: Record | None = None

    @property
    def resolution(self) -> dict[str, str] | None:
        found = None if self.own is None else self.own.data.get("resolution")
        return dict(found) if isinstance(found, dict) else None


def read_items(records: Iterable[Record]) -> dict[str, ItemView]:
    """The items of one window's ``item`` records (pages and item records), by key."""
    views: dict[str, ItemView] = {}
    own: dict[str, Record] = {}
    listed = list(records)
    carried = carried_states(record.data for record in listed)
    for record in listed:
        data = record.data
        if is_page(data):
            page = ItemPage.from_data(data)
            rank = page.rank
            later = carried.get((page.fence, page.seq))
            if later is not None:
                page = page.with_carried(later)
            for item in page.items():
                seen = views.get(item.key)
                if seen is None or seen.rank < rank:
                    views[item.key] = ItemView(item, rank)
        else:
            item = ItemRecord.from_data(data)
            rank = item_rank(data)
            own[item.key] = record
            seen = views.get(item.key)
            if seen is None or seen.rank <= rank:
                views[item.key] = ItemView(item, rank)
    for key, record in own.items():
        views[key] = ItemView(views[key].item, views[key].rank, record)
    return views


def item_records(store: Store, job: str, window: str | None = None) -> list[Record]:
    """The ledger's items of ``job`` (of one ``window``) as one record per item, in the form
    marks had before pages (``key``, ``fp``, ``state``, ``run_id``, ``expire_at``): for tools
    and tests that count or inspect items. Each record's version is that of the record its
    state was read from."""
    out = []
    for found_window, views in read_window_items(store, job, window).items():
        for key, view in views.items():
            data = view.item.to_data()
            if view.resolution is not None:
                data["resolution"] = view.resolution
            version = view.own.version if view.own is not None else 0
            out.append(Record(item_key_of(job, found_window, key), data, version))
    return sorted(out, key=lambda record: record.key.id)


def read_window_items(
    store: Store, job: str, window: str | None = None
) -> dict[str, dict[str, ItemView]]:
    """The items of ``job`` (of one ``window``), by window, then key (one query)."""
    by_window: dict[str, list[Record]] = {}
    for record in store.query(ITEM, job, prefix=f"{window}/" if window else ""):
        by_window.setdefault(record.key.id.split("/", 1)[0], []).append(record)
    return {w: read_items(records) for w, records in by_window.items()}


def key_function(key: Callable[[Any], Any] | str | None) -> Callable[[Any], Any]:
    """An item's key: a function of the item, an attribute/dict-key name, or ``str(item)``
    (refused, ValueError, when that text holds a memory address: ``<Customer object at
    0x7f…>`` differs on every attempt, so a retry would take every item for a new one and
    repeat its side effect)."""
    if key is None:
        return _text_key
    if callable(key):
        return key
    name = key

    def by_name(value: Any) -> Any:
        if isinstance(value, dict):
            return value[name]
        return getattr(value, name)

    return by_name


def _text_key(value: Any) -> str:
    text = str(value)
    if " at 0x" in text and _ADDRESS.search(text):
        raise ValueError(
            f"an item of type {type(value).__name__} has no stable key: its text {text[:80]!r} "
            "holds a memory address, which differs on every attempt; pass key= (a function "
            "or an attribute name, e.g. key='id')"
        )
    return text


_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")


def valid_key(raw: Any) -> str:
    text = raw if type(raw) is str else str(raw)
    if not text:
        raise ValueError("item keys must not be empty")
    if text.startswith(PAGE_TAG):
        raise ValueError(f"item keys must not start with {PAGE_TAG!r} (ledger pages use it)")
    if len(text) > MAX_ITEM_KEY_CHARS:
        raise ValueError(f"item key {text[:40]!r}… is over {MAX_ITEM_KEY_CHARS} characters")
    if unstorable(text):
        # escaping would let two keys share a ledger entry (and an idempotency key); refused
        # on every store alike, so a job that passes on one cannot strand a window on another
        raise ContentRefused(
            f"item key {storable(text[:40])!r} holds a NUL character or a lone surrogate, "
            "which not every store can hold (decode file names with errors='replace', or key "
            "items by a digest)"
        )
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
