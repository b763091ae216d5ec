"""Differential test: random commit sequences give the same outcomes on TableStore and on the
SQLite reference store (data, conflicts with their index and reason, queries)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwarden.adapters.azure import TableStore
from cronwarden.adapters.local import SQLiteStore
from cronwarden.emulators.azurite import Azurite
from cronwarden.model.errors import CommitConflict
from cronwarden.model.ports import (
    ITEM,
    LOCK,
    RUN,
    STATUS,
    Create,
    Delete,
    Key,
    Merge,
    Op,
    Store,
    Update,
)

pytestmark = pytest.mark.azure

JOB = "odd/job#?"
KEYS = [
    Key(RUN, JOB, "2026-01-01T00:00Z"),
    Key(RUN, JOB, "2026-01-02T00:00Z"),
    Key(LOCK, JOB),
    Key(STATUS, JOB),
    Key(ITEM, JOB, "2026-01-01T00:00Z/a/b"),
    Key(ITEM, JOB, "2026-01-01T00:00Z/a#c"),
    Key(ITEM, JOB, "2026-01-01T00:00Z/a?d\\e"),
    Key(ITEM, JOB, "2026-01-01T00:00Z/a.b"),
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
data = st.dictionaries(st.sampled_from(["a", "b", "state", "last-ok", "ü"]), values, max_size=3)
# Counters ("n", "m") never hold non-integers: incrementing one would be an input error, which
# TableStore raises while planning (before the service reports conflicts of earlier ops).
counters = st.dictionaries(st.sampled_from(["n", "m"]), st.integers(-5, 5), max_size=2)
op_spec = st.tuples(
    st.sampled_from(["create", "update", "delete", "merge"]),
    st.sampled_from(range(len(KEYS))),
    data,
    st.sampled_from(["current", "stale"]),
    counters,
    counters,
)
steps = st.lists(st.lists(op_spec, min_size=1, max_size=3), min_size=1, max_size=6)


class Side:
    """One backend plus the versions the test has seen there."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.current: dict[Key, Any] = {}
        self.stale: dict[Key, Any] = {}

    def build(self, spec: tuple[Any, ...]) -> Op:
        kind, index, payload, which, increments, maximums = spec
        key = KEYS[index]
        version = (self.current if which == "current" else self.stale).get(key, "none")
        if kind == "create":
            return Create(key, payload)
        if kind == "update":
            return Update(key, payload, version)
        if kind == "delete":
            return Delete(key, version)
        # integer counters only: drop fields that clash with a non-integer value in payload
        clean = {k: v for k, v in payload.items() if k not in increments and k not in maximums}
        return Merge(key, clean, increments, maximums)

    def commit(self, specs: list[tuple[Any, ...]]) -> tuple[str, Any]:
        ops = [self.build(spec) for spec in specs]
        try:
            versions = self.store.commit(ops)
        except CommitConflict as exc:
            return "conflict", (exc.index, exc.reason)
        except (TypeError, ValueError) as exc:  # e.g. incrementing a non-integer field
            return "error", type(exc).__name__
        for op, version in zip(ops, versions, strict=True):
            if op.key in self.current:
                self.stale[op.key] = self.current[op.key]
            self.current[op.key] = version
        return "ok", None

    def snapshot(self) -> tuple[Any, ...]:
        records = {k: self.store.get(k) for k in KEYS}
        gets = {k: (r.data if r else None) for k, r in records.items()}
        queries = [
            [(r.key, r.data) for r in self.store.query(kind, job, prefix=prefix)]
            for kind, job, prefix in [
                (ITEM, JOB, "2026-01-01T00:00Z/a"),
                (ITEM, None, ""),
                (RUN, JOB, ""),
                (STATUS, None, ""),
            ]
        ]
        ranged = [
            r.key.id
            for r in self.store.query(
                ITEM, JOB, start="2026-01-01T00:00Z/a#", end="2026-01-01T00:00Z/a?"
            )
        ]
        return gets, queries, ranged


@settings(
    max_examples=int(os.environ.get("CW_DIFF_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps)
def test_table_store_matches_the_sqlite_reference(
    azurite: Azurite, tmp_path_factory: pytest.TempPathFactory, plan: list[list[Any]]
) -> None:
    folder: Path = tmp_path_factory.mktemp("ref")
    reference = Side(SQLiteStore(str(folder / "ref.db")))
    table_name = azurite.new_table()
    table = Side(TableStore.from_connection_string(azurite.connection_string, table_name))
    try:
        for specs in plan:
            # a Table transaction touches each record once: keep the first op per key
            unique = list({spec[1]: spec for spec in reversed(specs)}.values())[::-1]
            assert table.commit(unique) == reference.commit(unique), unique
            assert table.snapshot() == reference.snapshot()
    finally:
        table.store.close()
        reference.store.close()
        azurite.drop_table(table_name)
