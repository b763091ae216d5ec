"""What a handler receives: the run's identity, checkpoints, the per-item ledger, cancellation.

Handlers are plain functions of one argument::

    def nightly_export(ctx: RunContext) -> None:
        for item in ctx.items(customers(), key=lambda c: c["id"]):
            mail.send(item.value, idempotency_key=item.idempotency_key)

Every write ``ctx`` makes is fenced (see :mod:`cronwarden.run.lease`): once another worker has taken
the run over, the next ``ctx`` call raises :class:`~cronwarden.model.errors.LeaseLost`.
"""

from __future__ import annotations

import enum
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from .ledger import (
    DONE_CODE,
    FLUSH_EVERY,
    MAX_ITEM_KEY_CHARS,
    Ledger,
    LedgerItem,
    Uncertain,
    idempotency_key,
    key_function,
)

if TYPE_CHECKING:
    from ..jobs.definitions import Job
    from ..model.logs import RunLogger
    from .lease import Lease

__all__ = [
    "FLUSH_EVERY",
    "MAX_CHECKPOINT_BYTES",
    "MAX_ITEM_KEY_CHARS",
    "Ledger",
    "LedgerItem",
    "RunContext",
    "RunInfo",
    "Uncertain",
]

T = TypeVar("T")
MAX_CHECKPOINT_BYTES = 32 * 1024


#: seconds an item takes from which its done mark is written on its own (with the default
#: ``flush_every``; 50 times a larger one), not waiting for a second item
_LONG_ITEM = 0.25


class _Default(enum.Enum):
    """The type of an argument left out (``None`` means something else there)."""

    DEFAULT = enum.auto()


_DEFAULT = _Default.DEFAULT


@dataclass(frozen=True)
class RunInfo:
    """The identity of one attempt of one run, as the handler sees it."""

    job: Job
    window: datetime
    run_key: str
    run_id: str
    attempt: int
    fence: int
    payload: dict[str, Any] = field(default_factory=dict)
    checkpoint: Any = None  #: the last checkpoint saved by any attempt of this run key


class RunContext:
    """The handler's view of one run. Not thread-safe: use it from the handler's thread.

    Built by the engine from the attempt's identity, the :class:`~cronwarden.run.lease.Lease` every
    write goes through, and the run's :class:`~cronwarden.run.ledger.Ledger`.
    """

    def __init__(self, info: RunInfo, *, lease: Lease, ledger: Ledger, log: RunLogger) -> None:
        self.info = info
        self.job = info.job
        self.window = info.window
        self.run_key = info.run_key
        self.run_id = info.run_id
        self.attempt = info.attempt
        self.fence = info.fence
        self.payload = info.payload
        self.log = log
        self.counters: dict[str, int] = {}
        self._checkpoint = info.checkpoint
        self._lease = lease
        self._ledger = ledger

    # -- identity ---------------------------------------------------------------------------
    @property
    def resumed(self) -> bool:
        """True when an earlier attempt of this run key ran (its checkpoint/ledger carry over)."""
        return self.fence > 1

    def idempotency_key(self, item_key: str) -> str:
        """A stable key for ``item_key`` in this window, the same on every attempt and worker."""
        return idempotency_key(self.run_key, item_key)

    # -- cancellation -----------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        return self._lease.interruption is not None

    def check(self) -> None:
        """Raise :class:`~cronwarden.model.errors.LeaseLost` / ``Cancelled`` if the run must
        stop."""
        self._lease.check()

    def sleep(self, seconds: float) -> None:
        """Sleep, waking early (and raising) when the run is asked to stop or reaches its
        deadline (max runtime) or its lease's end: never sleeps past either."""
        end = time.monotonic() + max(0.0, seconds)
        while True:
            self.check()
            left = end - time.monotonic()
            if left <= 0:
                return
            self._lease.stop_event.wait(max(0.001, min(left, self._until_deadline())))

    def _until_deadline(self) -> float:
        lease = self._lease
        limits = [lease.expires_at()] + ([lease.deadline] if lease.deadline is not None else [])
        return (min(limits) - lease.clock()).total_seconds()

    def count(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` (an int) to the counter ``name`` (non-empty text), reported with the
        run's completion. Raises ``TypeError``/``ValueError`` here, in the handler, for
        anything else: the store would refuse it only at the completion."""
        if not isinstance(name, str):
            raise TypeError(f"counter names are text, got {name!r}")
        if not name:
            raise ValueError("counter names must not be empty")
        if type(amount) is not int and (isinstance(amount, bool) or not isinstance(amount, int)):
            raise TypeError(f"counter {name!r}: the amount is an integer, got {amount!r}")
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
        self._write(checkpoint=json.loads(encoded))
        self._checkpoint = value

    def _write(self, marks: list[Any] | None = None, **run_changes: Any) -> None:
        """One fenced write carrying the ledger's owed marks (and ``marks``); the owed marks
        are forgotten only once the store acknowledged it."""
        sent = self._ledger.outgoing()
        self._lease.write([*sent.ops, *(marks or [])], **run_changes)
        self._ledger.acknowledge(sent)

    def _mark(self) -> None:
        """One fenced write of the ledger's owed marks alone (:meth:`Lease.mark`: the run
        record's compare-and-set, the lock untouched); forgotten once acknowledged."""
        sent = self._ledger.outgoing()
        self._lease.mark(sent.ops)
        self._ledger.acknowledge(sent)

    # -- the ledger -------------------------------------------------------------------------
    def items(
        self,
        iterable: Iterable[T],
        *,
        key: Callable[[T], Any] | str | None = None,
        fingerprint_of: Callable[[T], Any] | None = None,
        batch_size: int | None = None,
        flush_every: float | _Default | None = _DEFAULT,
    ) -> Iterator[LedgerItem[T]]:
        """Iterate ``iterable`` with at-most-once per item, resuming across attempts.

        Items are claimed in batches (one fenced write marks a batch *pending* and the previous
        one *done*); an item counts as done once the loop moves past it. Done marks are group
        committed: once the items finished since the last ledger write took ``flush_every``
        seconds (default :attr:`Ledger.flush_every`, 5 ms) not counting the longest of them,
        one fenced write records the items done so far, before the next item starts; an item
        of 250 ms or more (50 ``flush_every`` when that is longer) is written at once. After a
        crash or a takeover, at most the item in flight, the longest item finished since the
        last write and items taking under ``flush_every`` in all are yielded again (items of
        5 ms or more: at most 2; of 250 ms or more: the one in flight). ``flush_every=None``:
        done marks ride on the next batch's write only (fewer writes; up to ``batch_size`` items
        re-run after a crash).

        Work each item in the loop's body, one at a time: asking for the next item is what
        marks the last one done. ``list(ctx.items(...))``, ``sorted(...)`` or handing the
        iterator to a thread pool's ``map`` asks for every item before any work ran, so a
        failure after that loses the items not yet worked (a retry takes them for done).

        Items done by an earlier attempt are not yielded again. Items a dead owner left pending
        are *uncertain*: yielded again with ``uncertain=True`` (default) or quarantined. Reusing
        a key with a different value (by ``fingerprint_of``, default: the value itself) raises
        :class:`~cronwarden.model.errors.FingerprintMismatch`.

        ``key``: a function of the item, an attribute/dict-key name, or None for ``str(item)``.

        ``fingerprint_of``: what of an item must stay the same across attempts (default: the
        item). It is digested as JSON with sorted keys; a value JSON cannot encode stands for
        its ``str`` (a datetime, a Decimal), or, when that holds a memory address (a plain
        object's default repr), for its content: a dataclass's fields, else its attributes
        (``vars`` and ``__slots__``), encoded the same way. An object with no content at all
        stands for its type's name alone, so a change in it is not detected: return what
        identifies its input (``fingerprint_of=lambda c: c.email``).

        ``batch_size``: items claimed per ledger write (an int of at least 1; at most, and by
        default, the engine's ``batch_size``).
        """
        ledger = self._ledger
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        size = ledger.batch_size if batch_size is None else min(batch_size, ledger.batch_size)
        if size < 1:
            raise ValueError("batch_size must be at least 1")
        every = ledger.flush_every if isinstance(flush_every, _Default) else flush_every
        if every is not None and (
            isinstance(every, bool) or not isinstance(every, int | float) or not every >= 0
        ):
            raise ValueError(f"flush_every must be seconds >= 0 or None, not {every!r}")
        key_of = key_function(key)
        iterator = iter(iterable)
        loop = ledger.open_loop()
        check = self._lease.check
        counters = self.counters
        clock = time.monotonic
        interval = math.inf if every is None else every
        alone = max(_LONG_ITEM, 50 * interval)  #: an item this long is flushed on its own
        # since the last ledger write: when it was acknowledged, the last item's end, the longest
        # gap between two item ends (the group commit below)
        since = last = clock()
        longest = 0.0
        try:
            while batch := list(islice(iterator, size)):
                check()
                claimed = ledger.claim(batch, key_of, fingerprint_of, self.count, self._quarantined)
                if not claimed.marks:
                    continue
                # owed before the write: if it fails (or its outcome is unknown) they are released
                loop.claimed, loop.started = claimed.slots, 0
                self._mark()  # the new pages, carrying the marks owed (previous batch done)
                since = last = clock()
                longest = 0.0
                for (ready, _), (page, index) in zip(claimed.todo, claimed.slots, strict=True):
                    check()
                    loop.started += 1
                    yield ready
                    page.states[index] = DONE_CODE  # done: owed until a write carries it
                    counters["items_done"] = counters.get("items_done", 0) + 1
                    now = clock()
                    if now - last > longest:
                        longest = now - last
                    last = now
                    # group commit once the items ended since the last write took `interval`
                    # besides the longest of them: one short stall alone (a slow item, the
                    # process descheduled) costs no write, so a batch of quick items stays one
                    # write; a long item is written at once (its redo would cost the most)
                    if now - since - longest >= interval or longest >= alone:
                        check()  # a paused owner whose lease ran out writes nothing
                        self._mark()  # group commit: the done marks owed so far
                        since = last = clock()
                        longest = 0.0
        finally:
            # break, an exception, a failed write: this loop's never-started items are released
            ledger.close_loop(loop)

    def _quarantined(self, item_key: str) -> None:
        self.log.warning(
            "item %s was left pending by a previous owner; quarantined",
            item_key,
            extra={"event": "ledger.quarantined", "item": item_key},
        )

    def take_completed(self) -> list[Any]:
        """Deprecated: the engine takes the ledger's last marks with ``Ledger.final``."""
        return self._ledger.take_final()
