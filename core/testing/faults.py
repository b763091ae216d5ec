"""A store that fails on purpose: :class:`FaultyStore` wraps any real
:class:`~cronwarden.model.ports.Store` and raises one of the port's three failure outcomes on the
requests a plan picks, *before* the real call (nothing applied) or *after* it (applied, answer
lost)::

    store = FaultyStore(SQLiteStore(path), [Fault(UNKNOWN, after=True, match=marks("pending"))])

The three outcomes are the ones every adapter maps its SDK's errors to
(:mod:`cronwarden.model.errors`): ``CONFLICT`` (:class:`~cronwarden.model.errors.CommitConflict`,
nothing
applied), ``UNAVAILABLE`` (:class:`~cronwarden.model.errors.StoreUnavailable`, nothing applied) and
``UNKNOWN`` (:class:`~cronwarden.model.errors.CommitOutcomeUnknown`, applied or not: with
``after=True`` it was). Raising after the real call is how a timeout or a connection reset after
the request was sent looks to the caller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    StoreError,
    StoreUnavailable,
)
from cronwarden.model.ports import (
    ITEM,
    Key,
    Merge,
    Op,
    Record,
    RoundTripObserver,
    Store,
    Version,
    check_commit,
)
from cronwarden.model.records import page_states

CONFLICT, UNAVAILABLE, UNKNOWN = "conflict", "unavailable", "unknown"
OUTCOMES = (CONFLICT, UNAVAILABLE, UNKNOWN)

Matcher = Callable[[str, Sequence[Op]], bool]  #: (operation, ops of a commit) -> inject here?


def commits(operation: str, ops: Sequence[Op]) -> bool:
    """Every commit."""
    return operation == "commit"


def touches(kind: str) -> Matcher:
    """Commits with an op on a record of ``kind`` (``run``, ``lock``, ``status``, ``item``)."""
    return lambda operation, ops: operation == "commit" and any(op.key.kind == kind for op in ops)


def marks(state: str) -> Matcher:
    """Commits carrying a ledger mark that moves an item to ``state`` (``pending``, ``done``…):
    in a ledger page (:class:`~cronwarden.model.records.ItemPage`) or an item record."""

    def carries(op: Op) -> bool:
        if op.key.kind != ITEM or not isinstance(op, Merge):
            return False
        if "states" in op.fields:
            return any(mark == state for _, mark in page_states(op.fields))
        return op.fields.get("state") == state

    def match(operation: str, ops: Sequence[Op]) -> bool:
        return operation == "commit" and any(carries(op) for op in ops)

    return match


def reads(operation: str, ops: Sequence[Op]) -> bool:
    """Every ``get`` and ``query``."""
    return operation in ("get", "query")


@dataclass
class Fault:
    """Raise ``outcome`` on the requests ``match`` picks, after letting ``skip`` of them pass,
    ``times`` times. ``after=True`` makes the real call first (only meaningful for commits:
    the write lands, its answer is lost)."""

    outcome: str
    after: bool = False
    match: Matcher = commits
    skip: int = 0
    times: int = 1
    fired: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r}; expected one of {OUTCOMES}")
        if self.after and self.outcome != UNKNOWN:
            raise ValueError("only an unknown outcome can follow an applied write")

    def error(self, operation: str) -> StoreError:
        where = f"injected fault on {operation}"
        if self.outcome == CONFLICT:
            return CommitConflict(0, "version", where)
        if self.outcome == UNAVAILABLE:
            return StoreUnavailable(f"{where}: not applied")
        return CommitOutcomeUnknown(f"{where}: {'applied' if self.after else 'not applied'}")


class FaultyStore(Store):
    """``inner`` with the failures of ``plan`` injected (see the module docstring).

    Round trips are counted by ``inner`` (only requests that reach it); :attr:`injected` lists
    ``(operation, outcome, after)`` for every fault raised, for assertions and reports.
    """

    def __init__(self, inner: Store, plan: Sequence[Fault] = ()) -> None:
        self.inner = inner
        self.plan = list(plan)
        self.capabilities = inner.capabilities
        self.injected: list[tuple[str, str, bool]] = []
        self._guard = threading.Lock()

    # round trips and observers are the inner store's
    @property
    def round_trips(self) -> int:
        return self.inner.round_trips

    @round_trips.setter
    def round_trips(self, value: int) -> None:
        self.inner.round_trips = value

    def add_observer(self, observer: RoundTripObserver) -> Callable[[], None]:
        return self.inner.add_observer(observer)

    def _fault(self, operation: str, ops: Sequence[Op]) -> Fault | None:
        with self._guard:
            for fault in self.plan:
                if fault.fired >= fault.times or not fault.match(operation, ops):
                    continue
                if fault.skip > 0:
                    fault.skip -= 1
                    continue
                fault.fired += 1
                self.injected.append((operation, fault.outcome, fault.after))
                return fault
        return None

    def get(self, key: Key) -> Record | None:
        fault = self._fault("get", ())
        if fault is not None:
            raise StoreUnavailable(f"injected fault on get ({fault.outcome}): nothing read")
        return self.inner.get(key)

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
        fault = self._fault("query", ())
        if fault is not None:
            raise StoreUnavailable(f"injected fault on query ({fault.outcome}): nothing read")
        return self.inner.query(kind, job, prefix=prefix, start=start, end=end, limit=limit)

    def commit(self, ops: Sequence[Op]) -> list[Version]:
        if not ops:
            return []
        check_commit(ops, self.capabilities)
        fault = self._fault("commit", ops)
        if fault is None:
            return self.inner.commit(ops)
        if fault.after:
            self.inner.commit(ops)
        raise fault.error("commit")

    def close(self) -> None:
        self.inner.close()

    # the abstract hooks are never reached: the public methods delegate to ``inner``
    def _get(self, key: Key) -> Record | None:  # pragma: no cover
        return self.inner.get(key)

    def _commit(self, ops: list[Op]) -> list[Version]:  # pragma: no cover
        return self.inner.commit(ops)

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:  # pragma: no cover
        return self.inner.query(kind, job, prefix=prefix, start=start, end=end, limit=limit)
