"""FirestoreStore specifics beyond the conformance suite: layout, expiry, races, conflict
indexes, value encoding, and the RPCs each operation costs."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwarden.adapters.gcp import FirestoreStore
from cronwarden.adapters.gcp._codec import decode, doc_id, encode, prefix_end, split_doc_id
from cronwarden.adapters.gcp.indexes import render
from cronwarden.model.errors import CommitConflict
from cronwarden.model.ports import ITEM, LOCK, RUN, STATUS, Create, Delete, Key, Merge, Update

pytestmark = pytest.mark.gcp

REPO = Path(__file__).resolve().parents[2]
RUN_KEY = Key(RUN, "billing-sync", "2026-01-20T02:00Z")


def raw(store: FirestoreStore, key: Key) -> dict[str, Any]:
    snap = (
        store.client.collection(store.collection_name(key.kind))
        .document(doc_id(key.job, key.id))
        .get()
    )
    assert snap.exists
    return dict(snap.to_dict())


def count_rpcs(store: FirestoreStore) -> dict[str, int]:
    """Count the GAPIC calls the store makes (each one a network round trip)."""
    api = store.client._firestore_api
    counts: dict[str, int] = {}
    for name in ("commit", "batch_get_documents", "run_query", "begin_transaction"):
        original = getattr(api, name)

        def wrapper(*args: Any, _name: str = name, _orig: Any = original, **kw: Any) -> Any:
            counts[_name] = counts.get(_name, 0) + 1
            return _orig(*args, **kw)

        setattr(api, name, wrapper)
    return counts


def test_document_layout_and_expiry_fields(fs_store: FirestoreStore) -> None:
    item = Key(ITEM, "billing-sync", "2026-01-20T02:00Z/cust-1")
    fs_store.commit(
        [
            Create(RUN_KEY, {"state": "running"}),
            Create(item, {"state": "pending"}),
            Create(Key(LOCK, "billing-sync"), {"owner": "a"}),
            Merge(Key(STATUS, "billing-sync"), {"status": "running"}),
        ]
    )
    run = raw(fs_store, RUN_KEY)
    assert run["job"] == "billing-sync" and run["id"] == "2026-01-20T02:00Z"
    assert run["d"] == {"state": "running"}
    now = datetime.now(UTC)
    assert now + timedelta(days=89) < run["expire_at"] < now + timedelta(days=91)
    assert now + timedelta(days=29) < raw(fs_store, item)["expire_at"] < now + timedelta(days=31)
    assert "expire_at" not in raw(fs_store, Key(LOCK, "billing-sync"))
    assert "expire_at" not in raw(fs_store, Key(STATUS, "billing-sync"))


def test_callers_expire_at_drives_the_ttl_field(fs_store: FirestoreStore) -> None:
    fs_store.commit([Create(RUN_KEY, {"expire_at": "2026-03-01T00:00:00.000+00:00"})])
    assert raw(fs_store, RUN_KEY)["expire_at"] == datetime(2026, 3, 1, tzinfo=UTC)
    assert fs_store.get(RUN_KEY).data == {"expire_at": "2026-03-01T00:00:00.000+00:00"}  # type: ignore[union-attr]


def test_retention_is_configurable(firestore_emulator: Any) -> None:
    store = FirestoreStore(
        "cw-retention", emulator_host=firestore_emulator.address, retention={STATUS: timedelta(1)}
    )
    try:
        store.commit([Create(RUN_KEY, {}), Merge(Key(STATUS, RUN_KEY.job), {"a": 1})])
        assert "expire_at" not in raw(store, RUN_KEY)
        assert "expire_at" in raw(store, Key(STATUS, RUN_KEY.job))
    finally:
        store.close()


def test_twenty_racers_on_create_one_winner(fs_store: FirestoreStore) -> None:
    winners: list[int] = []
    conflicts: list[CommitConflict] = []
    barrier = threading.Barrier(20)

    def racer(n: int) -> None:
        barrier.wait()
        try:
            fs_store.commit([Create(RUN_KEY, {"owner": n}), Create(Key(LOCK, RUN_KEY.job), {})])
        except CommitConflict as exc:
            conflicts.append(exc)
            return
        winners.append(n)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(conflicts) == 19
    assert all(c.reason == "exists" and c.index in (0, 1) for c in conflicts)
    assert fs_store.get(RUN_KEY).data == {"owner": winners[0]}  # type: ignore[union-attr]


def test_twenty_compare_and_set_writers_lose_no_update(fs_store: FirestoreStore) -> None:
    fs_store.commit([Create(RUN_KEY, {"count": 0})])
    barrier = threading.Barrier(20)
    conflicts: list[CommitConflict] = []

    def bump() -> None:
        barrier.wait()
        for _ in range(3):
            while True:
                record = fs_store.get(RUN_KEY)
                assert record is not None
                try:
                    fs_store.commit(
                        [Update(RUN_KEY, {"count": record.data["count"] + 1}, record.version)]
                    )
                    break
                except CommitConflict as exc:
                    conflicts.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fs_store.get(RUN_KEY).data == {"count": 60}  # type: ignore[union-attr]
    assert conflicts and all((c.index, c.reason) == (0, "version") for c in conflicts)


def test_version_conflict_reports_the_failing_index(fs_store: FirestoreStore) -> None:
    v_run, v_lock = fs_store.commit(
        [Create(RUN_KEY, {"f": 1}), Create(Key(LOCK, "billing-sync"), {})]
    )
    fs_store.commit([Update(Key(LOCK, "billing-sync"), {"owner": "b"}, v_lock)])
    ops = [
        Update(RUN_KEY, {"f": 2}, v_run),
        Merge(Key(STATUS, "billing-sync"), {"s": 1}),
        Delete(Key(LOCK, "billing-sync"), v_lock),  # stale
    ]
    before = fs_store.round_trips
    with pytest.raises(CommitConflict) as info:
        fs_store.commit(ops)
    assert (info.value.index, info.value.reason) == (2, "version")
    assert fs_store.round_trips - before == 2  # the commit, then one re-read to find the op
    assert fs_store.get(RUN_KEY).data == {"f": 1}  # type: ignore[union-attr]


def test_exists_conflict_is_named_without_a_re_read(fs_store: FirestoreStore) -> None:
    fs_store.commit([Create(Key(LOCK, "billing-sync"), {})])
    before = fs_store.round_trips
    with pytest.raises(CommitConflict) as info:
        fs_store.commit([Create(RUN_KEY, {}), Create(Key(LOCK, "billing-sync"), {})])
    assert (info.value.index, info.value.reason) == (1, "exists")
    assert fs_store.round_trips - before == 1


@pytest.mark.parametrize("stale_first", [True, False])
def test_first_failing_op_wins_when_two_fail(fs_store: FirestoreStore, stale_first: bool) -> None:
    lock = Key(LOCK, "billing-sync")
    (v1,) = fs_store.commit([Create(RUN_KEY, {"f": 1})])
    fs_store.commit([Update(RUN_KEY, {"f": 2}, v1), Create(lock, {})])
    stale, existing = Update(RUN_KEY, {"f": 3}, v1), Create(lock, {"owner": "me"})
    ops = [stale, existing] if stale_first else [existing, stale]
    with pytest.raises(CommitConflict) as info:
        fs_store.commit(ops)
    assert info.value.index == 0
    assert info.value.reason == ("version" if stale_first else "exists")


def test_a_record_twice_in_one_commit_is_refused(fs_store: FirestoreStore) -> None:
    with pytest.raises(ValueError, match="once"):
        fs_store.commit([Create(RUN_KEY, {}), Merge(RUN_KEY, {"a": 1})])


def test_unchanged_write_still_changes_the_version(fs_store: FirestoreStore) -> None:
    status = Key(STATUS, "billing-sync")
    (v1,) = fs_store.commit([Merge(status, {"status": "ok"})])
    (v2,) = fs_store.commit([Merge(status, {"status": "ok"})])
    (v3,) = fs_store.commit([Update(status, {"status": "ok"}, v2)])
    assert len({v1, v2, v3}) == 3
    with pytest.raises(CommitConflict):
        fs_store.commit([Update(status, {"status": "stale"}, v2)])


@pytest.mark.parametrize(
    ("job", "record_id"),
    [
        ("a/b", "x/y"),
        ("pipe|job", "id|with|pipes"),
        ("pct%25", "%2F literal"),
        ("__dunder__", "__id__"),
        ("ünï", "日本/語 ✓"),
        (".", ".."),
    ],
)
def test_awkward_keys_round_trip(fs_store: FirestoreStore, job: str, record_id: str) -> None:
    key = Key(ITEM, job, record_id)
    assert split_doc_id(doc_id(job, record_id)) == (job, record_id)
    fs_store.commit([Create(key, {"k": record_id})])
    assert fs_store.get(key).data == {"k": record_id}  # type: ignore[union-attr]
    (found,) = fs_store.query(ITEM, job, prefix=record_id[:2])
    assert found.key == key


def test_json_values_firestore_cannot_hold_natively(fs_store: FirestoreStore) -> None:
    data = {
        "matrix": [[1, 2], [3, [4, 5]], []],
        "cw~list": ["not", "a", "marker"],
        "nested": {"cw~map": 1},
        "big": -(2**63),
    }
    assert decode(encode(data)) == data
    fs_store.commit([Create(RUN_KEY, data)])
    assert fs_store.get(RUN_KEY).data == data  # type: ignore[union-attr]


def test_oversized_record_is_refused_clearly(fs_store: FirestoreStore) -> None:
    with pytest.raises(ValueError, match="1 MiB"):
        fs_store.commit([Create(RUN_KEY, {"blob": "x" * 1_100_000})])
    assert fs_store.get(RUN_KEY) is None


def test_prefix_bounds() -> None:
    assert prefix_end("w/") == "w0"
    assert prefix_end("a\U0010ffff") == "b"
    assert prefix_end("\ud7ff") == "\ue000"
    assert prefix_end("") is None


def test_prefix_query_with_unicode_neighbours(fs_store: FirestoreStore) -> None:
    ids = ["w/a", "w/\U0001f600", "w/\uffff", "w0", "w.", "x/a"]
    fs_store.commit([Create(Key(ITEM, "j", i), {}) for i in ids])
    got = [r.key.id for r in fs_store.query(ITEM, "j", prefix="w/")]
    assert got == ["w/a", "w/\uffff", "w/\U0001f600"]  # UTF-8 byte order


def test_cross_job_range_query_is_ordered_by_job_then_id(fs_store: FirestoreStore) -> None:
    for job in ("b", "a", "c"):
        fs_store.commit([Create(Key(RUN, job, w), {}) for w in ("1", "2", "3")])
    got = fs_store.query(RUN, start="2", limit=4)
    assert [(r.key.job, r.key.id) for r in got] == [("a", "2"), ("a", "3"), ("b", "2"), ("b", "3")]


def test_each_operation_is_one_rpc_and_no_transactions(fs_store: FirestoreStore) -> None:
    rpcs = count_rpcs(fs_store)
    (v,) = fs_store.commit([Create(RUN_KEY, {"a": 1})])
    fs_store.commit([Update(RUN_KEY, {"a": 2}, v), Merge(Key(STATUS, RUN_KEY.job), {}, {"n": 1})])
    fs_store.get(RUN_KEY)
    fs_store.query(STATUS)
    assert rpcs == {"commit": 2, "batch_get_documents": 1, "run_query": 1}
    assert fs_store.round_trips == 4


def test_five_hundred_writes_in_one_commit(fs_store: FirestoreStore) -> None:
    ops = [Create(Key(ITEM, "big", f"w/{i:04d}"), {"i": i}) for i in range(500)]
    assert len(fs_store.commit(ops)) == 500
    assert len(fs_store.query(ITEM, "big", prefix="w/")) == 500


def test_declared_indexes_match_the_layout() -> None:
    path = REPO / "deployments" / "gcp" / "firestore.indexes.json"
    assert path.read_text() == render()
    config = json.loads(render())
    groups = {i["collectionGroup"] for i in config["indexes"]}
    assert groups == {"cw_run", "cw_lock", "cw_status", "cw_item", "cw_outbox"}
    ttl = {(o["collectionGroup"], o["fieldPath"]) for o in config["fieldOverrides"] if o.get("ttl")}
    assert ttl == {("cw_run", "expire_at"), ("cw_item", "expire_at")}
