"""The rules the Store port states once (merge semantics, validation, distinct keys,
capabilities, round-trip observers), checked against every adapter."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cronwarden.model.ports import (
    ITEM,
    RUN,
    STATUS,
    Create,
    Delete,
    Key,
    Merge,
    Op,
    Record,
    RoundTrip,
    Store,
    StoreCapabilities,
    Update,
    Version,
    apply_merge,
)

JOB = "rules"
STATUS_KEY = Key(STATUS, JOB)


# -- merge semantics: the one rule, and every adapter applying it ----------------------------
MERGES: list[tuple[dict[str, Any] | None, Merge]] = [
    (None, Merge(STATUS_KEY, {"a": "x"}, {"n": 2}, {"m": 7})),
    ({"a": "old", "keep": [1, {"b": None}], "n": 3, "m": 9}, Merge(STATUS_KEY, {"a": "new"})),
    ({"n": 3, "m": 9}, Merge(STATUS_KEY, {}, {"n": -5}, {"m": 4})),
    ({"n": None, "m": None}, Merge(STATUS_KEY, {"z": None}, {"n": 1}, {"m": -2})),
    ({"m": 1}, Merge(STATUS_KEY, {}, maximums={"m": 1_900_000_000})),
]


def test_apply_merge_states_the_semantics() -> None:
    assert apply_merge(None, MERGES[0][1]) == {"a": "x", "n": 2, "m": 7}
    assert apply_merge({"n": 3, "m": 9}, MERGES[2][1]) == {"n": -2, "m": 9}
    assert apply_merge({"n": None, "m": None}, MERGES[3][1]) == {"z": None, "n": 1, "m": -2}
    existing = {"a": 1}
    apply_merge(existing, Merge(STATUS_KEY, {"a": 2}))
    assert existing == {"a": 1}, "apply_merge must not change its input"


@pytest.mark.parametrize(("existing", "merge"), MERGES)
def test_every_store_merges_as_apply_merge_says(
    store: Store, existing: dict[str, Any] | None, merge: Merge
) -> None:
    if existing is not None:
        store.commit([Create(STATUS_KEY, existing)])
    store.commit([merge])
    record = store.get(STATUS_KEY)
    assert record is not None
    assert record.data == apply_merge(existing, merge)


# -- validation, in the port, for every adapter ----------------------------------------------
@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([Create(Key("bogus", JOB, "x"), {})], "unknown record kind"),
        ([Create(Key(RUN, "", "x"), {})], "job name"),
        ([Create(Key(RUN, JOB, "x"), {"at": [datetime(2026, 1, 1, tzinfo=UTC)]})], "JSON"),
        ([Create(Key(RUN, JOB, "x"), {"nested": {"s": {1, 2}}})], "JSON"),
        ([Create(Key(RUN, JOB, "x"), {"m": {1: "int key"}})], "text"),
        ([Merge(STATUS_KEY, {"n": 1}, {"n": 1})], "each field once"),
        ([Merge(STATUS_KEY, {}, {"n": 1}, {"n": 2})], "each field once"),
        ([Merge(STATUS_KEY, {}, {"n": 1.5})], "integer"),  # type: ignore[dict-item]
        ([Merge(STATUS_KEY, {}, maximums={"m": True})], "integer"),
        ([Create(Key(RUN, JOB, "x"), {}), Create(Key(RUN, "other", "y"), {})], "one job"),
        ([Create(Key(RUN, JOB, "x"), {}), Merge(Key(RUN, JOB, "x"), {"a": 1})], "once"),
    ],
)
def test_invalid_commits_are_refused_before_anything_is_sent(
    store: Store, ops: list[Op], message: str
) -> None:
    before = store.round_trips
    with pytest.raises(ValueError, match=message):
        store.commit(ops)
    assert store.round_trips == before, "a refused commit must not reach the backend"
    assert store.get(Key(RUN, JOB, "x")) is None and store.get(STATUS_KEY) is None


def test_the_commit_limit_is_the_declared_capability(store: Store) -> None:
    caps = store.capabilities
    assert isinstance(caps, StoreCapabilities)
    assert store.max_commit_ops == caps.max_commit_ops >= 3  # claim: run + lock + status
    ops = [Create(Key(ITEM, JOB, f"w/{i:05d}"), {}) for i in range(caps.max_commit_ops + 1)]
    with pytest.raises(ValueError, match="limit"):
        store.commit(ops)
    assert store.query(ITEM, JOB, limit=1) == []


# -- capabilities say what one round trip can do -----------------------------------------------
def test_atomic_capabilities_match_the_round_trips_a_merge_costs(store: Store) -> None:
    store.commit([Create(STATUS_KEY, {"n": 1, "m": 1})])
    cases = [
        (store.capabilities.atomic_increment, Merge(STATUS_KEY, {}, {"n": 1})),
        (store.capabilities.atomic_maximum, Merge(STATUS_KEY, {}, maximums={"m": 5})),
    ]
    for atomic, merge in cases:
        before = store.round_trips
        store.commit([merge])
        cost = store.round_trips - before
        assert cost == 1 if atomic else cost > 1
    before = store.round_trips
    store.commit([Merge(STATUS_KEY, {"plain": True})])
    assert store.round_trips - before == 1, "a Merge of plain fields is always one round trip"


# -- round trips through a public hook ----------------------------------------------------------
def test_observers_see_every_round_trip(store: Store) -> None:
    seen: list[RoundTrip] = []
    remove = store.add_observer(seen.append)
    before = store.round_trips
    (version,) = store.commit([Create(Key(RUN, JOB, "a"), {"x": 1})])
    store.get(Key(RUN, JOB, "a"))
    store.query(RUN, JOB)
    store.commit([Delete(Key(RUN, JOB, "a"), version)])
    assert len(seen) == store.round_trips - before == 4
    assert [trip.operation for trip in seen] == ["commit", "get", "query", "commit"]
    assert seen[0].kind == RUN and seen[0].ops == 1
    remove()
    store.get(Key(RUN, JOB, "a"))
    assert len(seen) == 4, "a removed observer is not called again"


def test_failed_preconditions_are_still_one_observed_round_trip(store: Store) -> None:
    from cronwarden.model.errors import CommitConflict

    (version,) = store.commit([Create(Key(RUN, JOB, "a"), {})])
    store.commit([Update(Key(RUN, JOB, "a"), {"v": 2}, version)])
    seen: list[RoundTrip] = []
    store.add_observer(seen.append)
    with pytest.raises(CommitConflict):
        store.commit([Update(Key(RUN, JOB, "a"), {"v": 3}, version)])
    assert seen and seen[0].operation == "commit"


# -- an adapter written before capabilities ----------------------------------------------------
class _Legacy(Store):
    max_commit_ops = 7

    def _get(self, key: Key) -> Record | None:
        return None

    def _commit(self, ops: list[Op]) -> list[Version]:
        return [None for _ in ops]

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:
        return []


def test_a_legacy_max_commit_ops_becomes_the_capability() -> None:
    legacy = _Legacy()
    assert legacy.capabilities.max_commit_ops == legacy.max_commit_ops == 7
    with pytest.raises(ValueError, match="limit is 7"):
        legacy.commit([Create(Key(ITEM, JOB, str(i)), {}) for i in range(8)])
