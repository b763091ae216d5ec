"""FirestoreStore builds Merge writes itself (the SDK's merge path cost most of a ledger batch's
client CPU): they must be the very writes ``batch.set(payload, merge=paths)`` makes. No emulator
needed: building a write does not connect."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from cronwarden.adapters.gcp import FirestoreStore
from cronwarden.adapters.gcp.store import _set_value
from cronwarden.model.ports import ITEM, STATUS, Key, Merge

CASES: list[Merge] = [
    Merge(
        Key(ITEM, "billing-sync", "2026-01-20T02:00Z/cust-1"),
        {
            "key": "cust-1",
            "fp": "f" * 16,
            "state": "pending",
            "run_id": "r1",
            "expire_at": "2026-02-19T02:00:00.000+00:00",
        },
    ),
    Merge(Key(ITEM, "billing-sync", "2026-01-20T02:00Z/a|b%c"), {"state": "done"}),
    Merge(
        Key(STATUS, "job"),
        {
            "a": {"x": [1, [2, {"y": None}]], "e": {}, "l": []},
            "b": None,
            "c.d": {},
            "ü`x": 1.5,
            "t": True,
            "big": -(2**63),
            "s": "",
            "n": [None, False, 0],
        },
    ),
    Merge(Key(STATUS, "job"), {}),
    Merge(Key(STATUS, "job"), {"status": "running"}, {"duplicates": 1}),
    Merge(Key(STATUS, "job"), {"status": "ok"}, {"failures": 1}, {"last_ts": 7}),
]


def _normal(write: Any) -> dict[str, Any]:
    data = MessageToDict(write._pb)
    fields = data.get("update", {}).get("fields", {})
    fields.pop("rev", None)  # random per write
    data.get("updateMask", {}).get("fieldPaths", []).sort()
    return data


@pytest.mark.parametrize("op", CASES, ids=range(len(CASES)))
def test_merge_writes_are_the_sdks(op: Merge) -> None:
    store = FirestoreStore("p", emulator_host="127.0.0.1:9")
    ours = store.client.batch()
    store._add(ours, op)
    sdk = store.client.batch()
    payload, paths = store._merge_payload(op)
    sdk.set(store._ref(op.key), payload, merge=paths)
    mine, theirs = _normal(ours._write_pbs[0]), _normal(sdk._write_pbs[0])
    if "expire_at" not in op.fields:  # computed from the clock at each build
        for data in (mine, theirs):
            data.get("update", {}).get("fields", {}).pop("expire_at", None)
    assert mine == theirs


@pytest.mark.parametrize(
    "value",
    [
        datetime.now(UTC) + timedelta(days=30),
        datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        {"nested": [1.0, "x", None, {"deep": []}]},
    ],
)
def test_values_encode_as_the_sdk_does(value: Any) -> None:
    from google.cloud.firestore_v1 import _helpers
    from google.cloud.firestore_v1.types import document

    pb = document.Value.pb()()
    _set_value(pb, value)
    assert pb == _helpers.encode_value(value)._pb


def test_out_of_range_integers_are_refused_like_the_sdk() -> None:
    from google.cloud.firestore_v1.types import document

    with pytest.raises(ValueError, match="out of range"):
        _set_value(document.Value.pb()(), 2**63)
