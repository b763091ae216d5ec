"""TableStore behaviour beyond the conformance suite, on Azurite."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from cronwarden.adapters.azure import TableLimitError, TableStore
from cronwarden.emulators.azurite import ACCOUNT_KEY, Azurite
from cronwarden.model.errors import CommitConflict, StoreUnavailable
from cronwarden.model.ports import ITEM, RUN, STATUS, Create, Delete, Key, Merge, Update

pytestmark = pytest.mark.azure

RUN_KEY = Key(RUN, "billing-sync", "2026-01-20T02:00Z")
STATUS_KEY = Key(STATUS, "billing-sync")


def test_layout_one_partition_per_job(table_store: TableStore) -> None:
    table_store.commit([Create(RUN_KEY, {"a": 1}), Merge(STATUS_KEY, {"s": "x"})])
    entities = list(table_store._table.list_entities())
    assert {(e["PartitionKey"], e["RowKey"]) for e in entities} == {
        ("billing-sync", "run:2026-01-20T02:00Z"),
        ("billing-sync", "status:"),
    }


def test_forbidden_key_characters_round_trip_and_query(table_store: TableStore) -> None:
    job = "odd/job#1"
    ids = ["w/a/b", "w/a#b", "w/a?b", "w/a\\b", "w/a\tb", "w/a b", "w/a.b", "w/a~b", "w/\x7f"]
    table_store.commit([Create(Key(ITEM, job, i), {"id": i}) for i in ids])
    for i in ids:
        record = table_store.get(Key(ITEM, job, i))
        assert record is not None and record.data == {"id": i} and record.key.id == i
    found = table_store.query(ITEM, job, prefix="w/a")
    assert [r.key.id for r in found] == sorted(i for i in ids if i.startswith("w/a"))
    assert all(r.key.job == job for r in found)
    ranged = table_store.query(ITEM, job, start="w/a#", end="w/a\\")
    assert [r.key.id for r in ranged] == sorted(i for i in ids if "w/a#" <= i < "w/a\\")


def test_query_orders_across_jobs_and_pages(table_store: TableStore) -> None:
    for job in ("b-job", "a/job", "c?job"):
        table_store.commit([Merge(Key(STATUS, job), {"job": job})])
    assert [r.key.job for r in table_store.query(STATUS)] == ["a/job", "b-job", "c?job"]
    assert [r.key.job for r in table_store.query(STATUS, limit=2)] == ["a/job", "b-job"]
    assert table_store.query(STATUS, limit=0) == []


def test_each_result_page_counts_as_a_round_trip(table_store: TableStore) -> None:
    for chunk in range(11):  # 1,100 records: two pages of at most 1,000
        table_store.commit(
            [Create(Key(ITEM, "big", f"{chunk:02d}/{i:03d}"), {"i": i}) for i in range(100)]
        )
    before = table_store.round_trips
    assert len(table_store.query(ITEM, "big")) == 1100
    assert table_store.round_trips - before == 2
    before = table_store.round_trips
    assert len(table_store.query(ITEM, "big", limit=5)) == 5
    assert table_store.round_trips - before == 1


def test_limits_are_enforced_before_anything_is_written(table_store: TableStore) -> None:
    cases = [
        ({"s": "x" * 40_000}, "64 KiB"),
        ({f"f{i}": i for i in range(253)}, "252"),
        ({f"s{i}": "x" * 32_000 for i in range(17)}, "1 MiB"),
    ]
    for data, message in cases:
        with pytest.raises(TableLimitError, match=message):
            table_store.commit([Merge(STATUS_KEY, {"ok": 1}), Create(RUN_KEY, data)])
    with pytest.raises(TableLimitError, match="1 KiB"):
        table_store.commit(
            [Merge(STATUS_KEY, {"ok": 1}), Create(Key(ITEM, "billing-sync", "k" * 600), {})]
        )
    assert table_store.get(STATUS_KEY) is None and table_store.get(RUN_KEY) is None


def test_merge_into_a_record_that_would_grow_past_a_limit_is_refused(
    table_store: TableStore,
) -> None:
    table_store.commit([Create(STATUS_KEY, {f"f{i}": i for i in range(252)})])
    with pytest.raises(TableLimitError, match="252"):
        table_store.commit([Merge(STATUS_KEY, {}, {"one_more": 1})])


def test_more_than_100_ops_are_refused(table_store: TableStore) -> None:
    assert table_store.max_commit_ops == 100
    ops = [Create(Key(ITEM, "billing-sync", f"w/{i:03d}"), {}) for i in range(101)]
    with pytest.raises(ValueError, match="limit is 100"):
        table_store.commit(ops)
    assert table_store.query(ITEM, "billing-sync") == []


def test_the_same_record_twice_in_one_commit_is_refused(table_store: TableStore) -> None:
    with pytest.raises(ValueError, match="once"):
        table_store.commit([Create(RUN_KEY, {}), Merge(RUN_KEY, {"x": 1})])


def test_twenty_racers_on_create_one_winner(table_store: TableStore) -> None:
    winners: list[int] = []
    conflicts: list[tuple[int, str]] = []
    barrier = threading.Barrier(20)

    def racer(n: int) -> None:
        barrier.wait()
        try:
            table_store.commit([Create(RUN_KEY, {"owner": n}), Merge(STATUS_KEY, {"last": n})])
        except CommitConflict as exc:
            conflicts.append((exc.index, exc.reason))
            return
        winners.append(n)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert conflicts == [(0, "exists")] * 19
    run, status = table_store.get(RUN_KEY), table_store.get(STATUS_KEY)
    assert run is not None and run.data == {"owner": winners[0]}
    assert status is not None and status.data == {"last": winners[0]}


def test_etag_compare_and_set(table_store: TableStore) -> None:
    (v1,) = table_store.commit([Create(RUN_KEY, {"fence": 1})])
    assert isinstance(v1, str) and v1.startswith('W/"datetime')
    (v2,) = table_store.commit([Update(RUN_KEY, {"fence": 2}, v1)])
    assert v2 != v1
    for stale in ([Update(RUN_KEY, {"fence": 3}, v1)], [Delete(RUN_KEY, v1)]):
        with pytest.raises(CommitConflict) as info:
            table_store.commit([Merge(STATUS_KEY, {"x": 1}), *stale])
        assert (info.value.index, info.value.reason) == (1, "version")
    assert table_store.get(STATUS_KEY) is None
    for foreign in (7, "7", None, 'W/"datetime'):  # not ETags: they can never match
        with pytest.raises(CommitConflict) as info:
            table_store.commit([Update(RUN_KEY, {"fence": 3}, foreign)])
        assert info.value.reason == "version"
    table_store.commit([Delete(RUN_KEY, v2)])
    with pytest.raises(CommitConflict) as info:  # deleting a missing record is refused
        table_store.commit([Delete(RUN_KEY, v2)])
    assert info.value.reason == "version"


def test_update_replaces_and_merge_keeps_fields(table_store: TableStore) -> None:
    (v1,) = table_store.commit([Create(RUN_KEY, {"a": 1, "b": 2})])
    (v2,) = table_store.commit([Update(RUN_KEY, {"a": 3}, v1)])
    table_store.commit([Merge(RUN_KEY, {"c": {"nested": [1, None]}, "a": "now text"})])
    record = table_store.get(RUN_KEY)
    assert record is not None and record.data == {"a": "now text", "c": {"nested": [1, None]}}
    assert record.version != v2


def test_merge_with_increments_costs_one_read(table_store: TableStore) -> None:
    before = table_store.round_trips
    table_store.commit([Merge(STATUS_KEY, {"s": "a"})])
    assert table_store.round_trips - before == 1
    before = table_store.round_trips
    table_store.commit([Create(RUN_KEY, {}), Merge(STATUS_KEY, {"s": "b"}, {"n": 2})])
    assert table_store.round_trips - before == 2
    record = table_store.get(STATUS_KEY)
    assert record is not None and record.data == {"s": "b", "n": 2}


def test_concurrent_increments_lose_nothing(table_store: TableStore) -> None:
    threads_n, per_thread = 6, 5
    barrier = threading.Barrier(threads_n)

    def bump() -> None:
        barrier.wait()
        for _ in range(per_thread):
            table_store.commit([Merge(STATUS_KEY, {"by": "x"}, {"n": 1}, maximums={"m": 3})])

    threads = [threading.Thread(target=bump) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    record = table_store.get(STATUS_KEY)
    assert record is not None and record.data == {"by": "x", "n": threads_n * per_thread, "m": 3}


def test_failed_commit_with_increments_applies_nothing(table_store: TableStore) -> None:
    table_store.commit([Create(RUN_KEY, {})])
    with pytest.raises(CommitConflict) as info:
        table_store.commit([Merge(STATUS_KEY, {}, {"n": 1}), Create(RUN_KEY, {})])
    assert (info.value.index, info.value.reason) == (1, "exists")
    assert table_store.get(STATUS_KEY) is None


def test_datetimes_and_json_types_round_trip(table_store: TableStore) -> None:
    moment = datetime(2026, 1, 20, 2, 0, 0, 500_000, tzinfo=UTC)
    data = {"at": moment, "big": 2**64, "f": 2.0, "i": -(2**63), "l": [], "d": {}, "n": None}
    table_store.commit([Create(RUN_KEY, data)])
    record = table_store.get(RUN_KEY)
    assert record is not None and record.data == data
    assert type(record.data["f"]) is float and type(record.data["i"]) is int


def test_unreachable_store_raises_store_unavailable_without_secrets(azurite: Azurite) -> None:
    from cronwarden.emulators._process import free_port

    dead = azurite.connection_string.replace(str(azurite.port), str(free_port()))
    store = TableStore.from_connection_string(dead, "nothere", create_table=False, retry_total=0)
    with pytest.raises(StoreUnavailable) as info:
        store.get(RUN_KEY)
    assert ACCOUNT_KEY not in str(info.value)
    store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.get(RUN_KEY)


def test_a_missing_table_is_a_configuration_error_not_a_conflict(azurite: Azurite) -> None:
    from cronwarden.model.errors import ConfigurationError

    name = azurite.new_table()
    store = TableStore.from_connection_string(azurite.connection_string, name, create_table=False)
    try:
        for action in (
            lambda: store.get(RUN_KEY),
            lambda: store.query(STATUS),
            lambda: store.commit([Create(RUN_KEY, {})]),
            lambda: store.commit([Merge(STATUS_KEY, {}, {"n": 1})]),
        ):
            with pytest.raises(ConfigurationError, match="does not exist"):
                action()
    finally:
        store.close()


def test_a_lost_increment_race_retries_with_a_fresh_read(table_store: TableStore) -> None:
    table_store.commit([Merge(STATUS_KEY, {"n": 10})])
    original = table_store._read
    reads: list[object] = []

    def read_then_interfere(*args: str) -> object:
        entity = original(*args)
        reads.append(entity)
        if len(reads) == 1:  # another writer slips in after the first read only
            table_store.commit([Merge(STATUS_KEY, {"n": 100, "other": "x"})])
        return entity

    table_store._read = read_then_interfere  # type: ignore[method-assign]
    before = table_store.round_trips
    table_store.commit([Create(RUN_KEY, {}), Merge(STATUS_KEY, {}, {"n": 1})])
    # read + refused commit, the interfering commit, then read + commit again
    assert table_store.round_trips - before == 5 and len(reads) == 2
    record = table_store.get(STATUS_KEY)
    assert record is not None and record.data == {"n": 101, "other": "x"}
    assert table_store.get(RUN_KEY) is not None


def test_endless_increment_races_give_up_without_applying_anything(
    table_store: TableStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    table_store.commit([Merge(STATUS_KEY, {"n": 0})])
    original = table_store._read

    def read_then_interfere(*args: str) -> object:
        entity = original(*args)
        table_store.commit([Merge(STATUS_KEY, {"other": "x"})])
        return entity

    monkeypatch.setattr(table_store, "_read", read_then_interfere)
    monkeypatch.setattr(table_store, "merge_attempts", 3)
    with pytest.raises(StoreUnavailable, match="nothing was applied"):
        table_store.commit([Create(RUN_KEY, {}), Merge(STATUS_KEY, {}, {"n": 1})])
    assert table_store.get(RUN_KEY) is None
    record = table_store.get(STATUS_KEY)
    assert record is not None and record.data["n"] == 0


def test_the_first_failing_op_is_reported_even_with_a_foreign_version(
    table_store: TableStore,
) -> None:
    table_store.commit([Create(RUN_KEY, {})])
    other = Key(RUN, "billing-sync", "2026-01-21T02:00Z")
    with pytest.raises(CommitConflict) as info:
        table_store.commit([Create(RUN_KEY, {}), Update(other, {}, "not-an-etag")])
    assert (info.value.index, info.value.reason) == (0, "exists")
    with pytest.raises(CommitConflict) as info:
        table_store.commit([Merge(STATUS_KEY, {}), Delete(RUN_KEY, 12)])
    assert (info.value.index, info.value.reason) == (1, "version")
    assert table_store.get(STATUS_KEY) is None
