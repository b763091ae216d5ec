"""The SQLite store's query decodes each record's own stored text (``_decode_all``): tricky
JSON comes back exactly, and a damaged stored text raises instead of being returned as
something else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cronwarden.adapters.local import SQLiteStore
from cronwarden.adapters.local.store import _decode_all
from cronwarden.model.ports import STATUS, Create, Key

TRICKY = [
    {"a": "x,y]}{", "b": [1, [2, {"c": None}]], "d": '\u00e9\u2603\\"', "e": 1.5e300},
    {},
    {"nested": {"list": [], "map": {}}, "neg": -(2**70), "t": True, "f": False},
]


def test_query_returns_each_records_data_exactly(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    for n, data in enumerate(TRICKY):
        store.commit([Create(Key(STATUS, f"job-{n}"), data)])
    assert [r.data for r in store.query(STATUS)] == TRICKY
    store.close()


def test_decode_all_accepts_whitespace_and_refuses_damage() -> None:
    assert _decode_all([' {"a": 1} ', "{}"]) == [{"a": 1}, {}]
    # two halves that would join into valid JSON: each is decoded (and refused) alone
    with pytest.raises(json.JSONDecodeError):
        _decode_all(['{"a":[1', '2]},{"x":0}'])
    with pytest.raises(json.JSONDecodeError):
        _decode_all(['{"a":1}{"b":2}'])


def test_a_damaged_stored_record_fails_the_query(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    store.commit([Create(Key(STATUS, "good"), {"ok": 1})])
    store._db.connection().execute(
        "INSERT INTO records VALUES (?, ?, '', ?, 99)", (STATUS, "bad", '{"a":1},{"b":2}')
    )
    with pytest.raises(json.JSONDecodeError):
        store.query(STATUS)
    store.close()
