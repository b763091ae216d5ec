"""The Store contract (see ``cronwarden.model.ports.Store``), run against every adapter.

Reusable as :class:`StoreContract`: subclass it and provide a ``store_factory`` fixture.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

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
    Store,
    Update,
)

from ._collect import attach_tests, opened

RUN_KEY = Key(RUN, "billing-sync", "2026-01-20T02:00Z")
LOCK_KEY = Key(LOCK, "billing-sync")
STATUS_KEY = Key(STATUS, "billing-sync")


def test_get_missing_returns_none(store: Store) -> None:
    assert store.get(RUN_KEY) is None


def test_create_then_get_round_trips_json_values(store: Store) -> None:
    data = {
        "state": "running",
        "fence": 1,
        "big": 2**53 + 1,
        "ratio": 0.25,
        "ok": True,
        "none": None,
        "list": [1, "a"],
        "nested": {"a": {"b": "ü ✓"}},
    }
    (version,) = store.commit([Create(RUN_KEY, data)])
    record = store.get(RUN_KEY)
    assert record is not None
    assert record.data == data
    assert record.version == version
    assert record.key == RUN_KEY


def test_create_existing_is_refused_and_changes_nothing(store: Store) -> None:
    store.commit([Create(RUN_KEY, {"owner": "a"})])
    with pytest.raises(CommitConflict) as info:
        store.commit([Create(RUN_KEY, {"owner": "b"})])
    assert info.value.index == 0
    assert info.value.reason == "exists"
    record = store.get(RUN_KEY)
    assert record is not None and record.data == {"owner": "a"}


def test_update_with_current_version_succeeds_and_changes_version(store: Store) -> None:
    (v1,) = store.commit([Create(RUN_KEY, {"fence": 1})])
    (v2,) = store.commit([Update(RUN_KEY, {"fence": 2}, v1)])
    assert v2 != v1
    record = store.get(RUN_KEY)
    assert record is not None and record.data == {"fence": 2} and record.version == v2


def test_update_with_stale_version_is_refused(store: Store) -> None:
    (v1,) = store.commit([Create(RUN_KEY, {"fence": 1})])
    store.commit([Update(RUN_KEY, {"fence": 2}, v1)])
    with pytest.raises(CommitConflict) as info:
        store.commit([Update(RUN_KEY, {"fence": 99}, v1)])
    assert info.value.reason == "version"
    record = store.get(RUN_KEY)
    assert record is not None and record.data == {"fence": 2}


def test_update_of_missing_record_is_refused(store: Store) -> None:
    (v1,) = store.commit([Create(RUN_KEY, {"x": 1})])
    other = Key(RUN, "billing-sync", "2026-01-21T02:00Z")
    with pytest.raises(CommitConflict) as info:
        store.commit([Update(other, {"x": 2}, v1)])
    assert info.value.reason == "version"
    assert store.get(other) is None


def test_version_never_repeats_across_delete_and_recreate(store: Store) -> None:
    (v1,) = store.commit([Create(LOCK_KEY, {"owner": "a"})])
    store.commit([Delete(LOCK_KEY, v1)])
    assert store.get(LOCK_KEY) is None
    (v2,) = store.commit([Create(LOCK_KEY, {"owner": "b"})])
    assert v2 != v1
    with pytest.raises(CommitConflict):
        store.commit([Update(LOCK_KEY, {"owner": "stale"}, v1)])
    with pytest.raises(CommitConflict):
        store.commit([Delete(LOCK_KEY, v1)])
    record = store.get(LOCK_KEY)
    assert record is not None and record.data == {"owner": "b"}


def test_merge_upserts_fields_and_increments(store: Store) -> None:
    store.commit([Merge(STATUS_KEY, {"status": "running", "run_id": "r1"}, {"skips": 1})])
    store.commit([Merge(STATUS_KEY, {"status": "skipped"}, {"skips": 2, "failures": 1})])
    record = store.get(STATUS_KEY)
    assert record is not None
    assert record.data == {"status": "skipped", "run_id": "r1", "skips": 3, "failures": 1}


def test_commit_is_all_or_nothing(store: Store) -> None:
    (v_run,) = store.commit([Create(RUN_KEY, {"state": "running"})])
    store.commit([Create(LOCK_KEY, {"owner": "a"})])
    item = Key(ITEM, "billing-sync", "2026-01-20T02:00Z/cust-1")
    with pytest.raises(CommitConflict) as info:
        store.commit(
            [
                Update(RUN_KEY, {"state": "succeeded"}, v_run),
                Merge(STATUS_KEY, {"status": "succeeded"}, {"n": 1}),
                Create(item, {"state": "done"}),
                Create(LOCK_KEY, {"owner": "b"}),  # fails: exists
            ]
        )
    assert info.value.index == 3
    run = store.get(RUN_KEY)
    assert run is not None and run.data == {"state": "running"} and run.version == v_run
    assert store.get(STATUS_KEY) is None
    assert store.get(item) is None


def test_commit_returns_versions_per_op(store: Store) -> None:
    (v_lock,) = store.commit([Create(LOCK_KEY, {"owner": "a"})])
    versions = store.commit(
        [
            Create(RUN_KEY, {"s": 1}),
            Merge(STATUS_KEY, {"s": 1}),
            Delete(LOCK_KEY, v_lock),
        ]
    )
    assert len(versions) == 3
    assert versions[2] is None
    run, status = store.get(RUN_KEY), store.get(STATUS_KEY)
    assert run is not None and run.version == versions[0]
    assert status is not None and status.version == versions[1]


def test_commit_refuses_ops_of_several_jobs(store: Store) -> None:
    with pytest.raises(ValueError, match="one job"):
        store.commit([Create(RUN_KEY, {}), Create(Key(RUN, "other-job", "x"), {})])


def test_query_by_kind_job_prefix_and_range(store: Store) -> None:
    for job in ("alpha", "beta"):
        for window in ("2026-01-01T00:00Z", "2026-01-02T00:00Z", "2026-01-03T00:00Z"):
            store.commit([Create(Key(RUN, job, window), {"job": job, "w": window})])
        store.commit([Merge(Key(STATUS, job), {"job": job})])
        store.commit(
            [Create(Key(ITEM, job, f"2026-01-01T00:00Z/{i:03d}"), {"i": i}) for i in range(5)]
            + [Create(Key(ITEM, job, "2026-01-02T00:00Z/000"), {"i": 99})]
        )

    statuses = store.query(STATUS)
    assert [r.key.job for r in statuses] == ["alpha", "beta"]

    runs = store.query(RUN, "beta")
    assert [r.key.id for r in runs] == [
        "2026-01-01T00:00Z",
        "2026-01-02T00:00Z",
        "2026-01-03T00:00Z",
    ]
    assert all(r.data["job"] == "beta" for r in runs)

    ranged = store.query(RUN, "alpha", start="2026-01-02T00:00Z", end="2026-01-03T00:00Z")
    assert [r.key.id for r in ranged] == ["2026-01-02T00:00Z"]

    items = store.query(ITEM, "alpha", prefix="2026-01-01T00:00Z/")
    assert [r.data["i"] for r in items] == [0, 1, 2, 3, 4]
    limited = store.query(RUN, "alpha", limit=2)
    assert len(limited) == 2

    fetched = store.get(runs[0].key)
    assert fetched is not None and fetched.version == runs[0].version


def test_create_race_has_exactly_one_winner(store: Store) -> None:
    winners: list[int] = []
    barrier = threading.Barrier(8)

    def racer(n: int) -> None:
        barrier.wait()
        try:
            store.commit([Create(RUN_KEY, {"owner": n}), Merge(STATUS_KEY, {"last": n})])
        except CommitConflict:
            return
        winners.append(n)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    record = store.get(RUN_KEY)
    assert record is not None and record.data == {"owner": winners[0]}


def test_compare_and_set_race_loses_no_update(store: Store) -> None:
    store.commit([Create(RUN_KEY, {"count": 0})])
    per_thread, threads_n = 5, 4

    def bump() -> None:
        done = 0
        while done < per_thread:
            record = store.get(RUN_KEY)
            assert record is not None
            try:
                store.commit([Update(RUN_KEY, {"count": record.data["count"] + 1}, record.version)])
            except CommitConflict:
                continue
            done += 1

    threads = [threading.Thread(target=bump) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    record = store.get(RUN_KEY)
    assert record is not None and record.data["count"] == per_thread * threads_n


def test_round_trips_are_counted(store: Store) -> None:
    before = store.round_trips
    store.commit([Create(RUN_KEY, {}), Merge(STATUS_KEY, {"a": 1})])
    store.get(RUN_KEY)
    store.query(STATUS)
    assert store.round_trips - before == 3


def test_max_commit_ops_is_honoured(store: Store) -> None:
    n = min(store.max_commit_ops, 120)
    ops = [Create(Key(ITEM, "billing-sync", f"w/{i:04d}"), {"i": i}) for i in range(n)]
    assert len(store.commit(ops)) == n
    assert len(store.query(ITEM, "billing-sync", prefix="w/")) == n
    too_many = [
        Create(Key(ITEM, "billing-sync", f"x/{i}"), {}) for i in range(store.max_commit_ops + 1)
    ]
    with pytest.raises(ValueError, match="limit"):
        store.commit(too_many)


def test_merge_maximums_only_raise(store: Store) -> None:
    store.commit([Merge(STATUS_KEY, {"status": "succeeded"}, maximums={"last_ok": 1_800_000_000})])
    store.commit([Merge(STATUS_KEY, {"status": "succeeded"}, maximums={"last_ok": 1_700_000_000})])
    record = store.get(STATUS_KEY)
    assert record is not None and record.data["last_ok"] == 1_800_000_000
    store.commit([Merge(STATUS_KEY, {}, maximums={"last_ok": 1_900_000_000})])
    record = store.get(STATUS_KEY)
    assert record is not None and record.data["last_ok"] == 1_900_000_000


def test_commit_refuses_two_ops_on_one_record(store: Store) -> None:
    with pytest.raises(ValueError, match="at most once"):
        store.commit([Create(RUN_KEY, {"a": 1}), Merge(RUN_KEY, {"b": 2})])
    assert store.get(RUN_KEY) is None


def test_query_due_returns_status_records_due_by_either_field(store: Store) -> None:
    """``query_due(before)``: status records whose ``due_at`` or ``watch_due`` is an integer
    ``<= before``; null, missing or non-integer fields are never due; other kinds never."""
    rows: dict[str, dict[str, Any]] = {
        "a-run-due": {"due_at": 100, "watch_due": 900},
        "b-watch-due": {"due_at": None, "watch_due": 50},
        "c-both-due": {"due_at": 10, "watch_due": 20},
        "d-always": {"watch_due": 0},
        "e-at-the-second": {"due_at": 200},
        "f-later": {"due_at": 201, "watch_due": 5000},
        "g-never": {"status": "succeeded"},
        "h-null": {"due_at": None, "watch_due": None},
        "i-text": {"due_at": "100", "watch_due": "0"},
    }
    for job, data in rows.items():
        store.commit([Merge(Key(STATUS, job), data)])
    store.commit([Create(Key(RUN, "a-run-due", "2026-01-20T02:00Z"), {"due_at": 1})])
    before = store.round_trips
    due = store.query_due(200)
    assert store.round_trips > before  # a round trip (or one per indexed field), counted
    assert sorted(r.key.job for r in due) == [
        "a-run-due",
        "b-watch-due",
        "c-both-due",
        "d-always",
        "e-at-the-second",
    ]
    assert all(r.key.kind == STATUS and r.key.id == "" for r in due)
    found = {r.key.job: r for r in due}
    assert found["a-run-due"].data == rows["a-run-due"]
    current = store.get(Key(STATUS, "c-both-due"))
    assert current is not None and found["c-both-due"].version == current.version
    assert store.query_due(-1) == []


def test_query_due_follows_every_write_of_the_due_fields(store: Store) -> None:
    """A record leaves the due set when its fields move past ``before`` (Merge, Update) and
    enters it when they move back; a deleted record is gone."""
    key = Key(STATUS, "billing-sync")
    store.commit([Merge(key, {"due_at": 100, "watch_due": 1000})])
    assert [r.key.job for r in store.query_due(150)] == ["billing-sync"]
    store.commit([Merge(key, {"due_at": None})])
    assert store.query_due(150) == []
    record = store.get(key)
    assert record is not None
    store.commit([Update(key, {**record.data, "watch_due": 120}, record.version)])
    assert [r.key.job for r in store.query_due(150)] == ["billing-sync"]
    store.commit([Merge(key, {}, maximums={"watch_due": 2000})])
    assert store.query_due(1999) == []
    record = store.get(key)
    assert record is not None
    store.commit([Delete(key, record.version)])
    assert store.query_due(10**12) == []


class StoreContract:
    """The Store contract as a test class: ``class TestMyStore(StoreContract): pass``.

    Needs a ``store_factory`` fixture: a callable returning a fresh, empty store, or a context
    manager yielding one (entered before and exited after each test; a plain store is closed).
    """

    @pytest.fixture
    def store(self, store_factory: Callable[[], Any]) -> Iterator[Store]:
        with opened(store_factory()) as made:
            yield made


attach_tests(StoreContract, dict(globals()))
