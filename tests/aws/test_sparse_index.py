"""The ``by-kind`` index is sparse: only status records carry its keys, so a run record, a lock
or a ledger page is not written into it again (DynamoDB bills every index copy). A query across
jobs of another kind still answers (a filtered scan), and an item written while every kind
carried the keys leaves the index on its next write."""

from __future__ import annotations

from typing import Any

import pytest

from cronwarden.adapters.aws import DynamoStore
from cronwarden.emulators.aws import MotoServer
from cronwarden.model.ports import ITEM, RUN, STATUS, Create, Key, Merge, Update

pytestmark = [pytest.mark.aws]


def _raw(store: DynamoStore, key: Key) -> dict[str, Any]:
    item = store._db.get_item(
        TableName=store.table,
        Key={"pk": {"S": key.job}, "sk": {"S": f"{key.kind}#{key.id}"}},
        ConsistentRead=True,
    )["Item"]
    assert isinstance(item, dict)
    return item


def test_only_status_records_carry_the_index_keys(moto_server: MotoServer) -> None:
    store = DynamoStore.from_settings(moto_server.settings(create_missing=True))
    run_a, run_b = Key(RUN, "a", "2026-01-01T00:00Z"), Key(RUN, "b", "2026-01-01T00:00Z")
    store.commit([Create(run_a, {"state": "running"}), Merge(Key(STATUS, "a"), {"n": 1})])
    store.commit([Create(run_b, {"state": "running"})])  # a lone create: a plain PutItem
    store.commit([Merge(Key(ITEM, "a", "w/1"), {"state": "done"})])
    assert "k" in _raw(store, Key(STATUS, "a")) and "jk" in _raw(store, Key(STATUS, "a"))
    for key in (run_a, run_b, Key(ITEM, "a", "w/1")):
        raw = _raw(store, key)
        assert "k" not in raw and "jk" not in raw, raw
    # across jobs: status through the index, runs by a scan; both complete and ordered
    assert [r.key.job for r in store.query(STATUS)] == ["a"]
    assert [r.key for r in store.query(RUN)] == [run_a, run_b]
    assert [r.key for r in store.query(RUN, prefix="2026-01-01")] == [run_a, run_b]
    assert store.query(RUN, limit=1)[0].key == run_a
    store.close()


def test_an_item_written_with_the_index_keys_leaves_the_index(moto_server: MotoServer) -> None:
    store = DynamoStore.from_settings(moto_server.settings(create_missing=True))
    old = Key(RUN, "legacy", "2026-01-01T00:00Z")
    store._db.put_item(  # as written before the index was sparse
        TableName=store.table,
        Item={
            "pk": {"S": "legacy"},
            "sk": {"S": f"{RUN}#2026-01-01T00:00Z"},
            "k": {"S": RUN},
            "jk": {"S": "legacy#2026-01-01T00:00Z"},
            "v": {"S": "old"},
            "f.state": {"S": '"running"'},
        },
    )
    assert [r.key for r in store.query(RUN)] == [old]  # found by the scan either way
    store.commit([Merge(old, {"state": "failed"})])
    raw = _raw(store, old)
    assert "k" not in raw and "jk" not in raw and raw["f.state"] == {"S": '"failed"'}, raw
    found = store.get(old)
    assert found is not None
    store.commit([Update(old, {"state": "succeeded"}, found.version)])
    raw = _raw(store, old)
    assert "k" not in raw and raw["f.state"] == {"S": '"succeeded"'}, raw
    store.close()
