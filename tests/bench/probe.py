"""Counting a store's round trips per call, and naming what each commit was for."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cronwarden.model.ports import ITEM, LOCK, RUN, Create, Delete, Op, Store, Update


def classify(ops: Sequence[Op]) -> str:
    """What an engine commit was for: claim, renewal, ledger batch, complete, or other."""
    kinds = [(type(op).__name__, op.key.kind) for op in ops]
    if any(isinstance(op, Create) and op.key.kind == RUN for op in ops):
        return "claim"
    if len(ops) >= 2 and isinstance(ops[0], Update) and ops[0].key.kind == RUN:
        if isinstance(ops[1], Delete) and ops[1].key.kind == LOCK:
            return "complete"
        if any(op.key.kind == ITEM for op in ops[2:]):
            return "ledger batch"
        if len(ops) == 2:
            return "renewal"
        return "checkpoint"
    return "other: " + ", ".join(f"{a} {b}" for a, b in kinds[:3])


@dataclass
class Probe:
    """Wraps ``store.commit/get/query`` of one store instance; the store's own
    ``round_trips`` counter is the truth (it includes reads an adapter makes inside a commit)."""

    store: Store
    calls: list[tuple[str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        store = self.store
        originals: dict[str, Any] = {
            name: getattr(store, name) for name in ("commit", "get", "query")
        }

        def wrap(name: str) -> Any:
            original = originals[name]

            def call(*args: Any, **kwargs: Any) -> Any:
                before = store.round_trips
                label = classify(args[0]) if name == "commit" else name
                try:
                    return original(*args, **kwargs)
                finally:
                    self.calls.append((label, store.round_trips - before))

            return call

        for name in originals:
            setattr(store, name, wrap(name))

    def reset(self) -> None:
        self.calls.clear()

    @property
    def total(self) -> int:
        return sum(rt for _, rt in self.calls)

    def breakdown(self) -> dict[str, dict[str, int]]:
        """Per label: how many calls, and how many round trips they cost."""
        calls: Counter[str] = Counter()
        trips: Counter[str] = Counter()
        for label, rt in self.calls:
            calls[label] += 1
            trips[label] += rt
        return {label: {"calls": calls[label], "round_trips": trips[label]} for label in calls}
