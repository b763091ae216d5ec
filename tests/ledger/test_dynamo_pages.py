"""DynamoDB's compact ledger pages (:mod:`cronwarden.adapters.aws._pages`), on moto through the
real SDK: a page reads back exactly as written whatever its keys and fingerprints, a run's pages
resume as before, and a page of 100 items is billed as one small item (the write units a
transaction costs are 2 per KB of each item it writes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest
from cronwarden.jobs import JobSet
from cronwarden.model.ports import ITEM, Merge, Store
from cronwarden.model.records import ItemPage, page_key_of
from cronwarden.model.runs import fingerprint
from cronwarden.run.engine import Engine, EngineSettings
from cronwarden.run.ledger import read_items
from tests.backends import dynamodb_store
from tests.support.harness import at

pytestmark = pytest.mark.aws
W = at("2026-01-20T02:00Z")
WINDOW = "2026-01-20T02:00Z"


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with dynamodb_store(request, tmp_path) as made:
        yield made


def _page(seq: int, keys: list[str], fps: list[str], states: str) -> ItemPage:
    return ItemPage(1, seq, "run-1", keys, fps, states, at("2026-02-20T02:00Z"))


def _item_bytes(store: Store, seq: int) -> int:
    """The page's item size as DynamoDB counts it: attribute names and values."""
    key = page_key_of("fan", WINDOW, 1, seq)
    raw: dict[str, Any] = store._db.get_item(  # type: ignore[attr-defined]
        TableName=store.table,  # type: ignore[attr-defined]
        Key={"pk": {"S": key.job}, "sk": {"S": f"{key.kind}#{key.id}"}},
        ConsistentRead=True,
    )["Item"]
    total = 0
    for name, value in raw.items():
        ((_, body),) = value.items()
        total += len(name) + (len(body) if isinstance(body, bytes) else len(str(body).encode()))
    return total


CASES = {
    "own ints": ([str(n) for n in range(100)], [fingerprint(n) for n in range(100)]),
    "own texts": ([f"k{n}" for n in range(100)], [fingerprint(f"k{n}") for n in range(100)]),
    "digits as text": ([str(n) for n in range(10)], [fingerprint(str(n)) for n in range(10)]),
    "other values": (
        [f"c{n}" for n in range(100)],
        [fingerprint({"id": n, "mail": f"{n}@x"}) for n in range(100)],
    ),
    "mixed and unicode": (
        ["0", "007", "-3", "é\u2028\U0001f600", "a b", '"q"', "x" * 200],
        [
            fingerprint(0),
            fingerprint("007"),
            fingerprint(-3),
            fingerprint("é"),
            "f" * 32,
            fingerprint('"q"'),
            fingerprint("x" * 200),
        ],
    ),
    "not hex: generic form": (["a", "b"], ["not-a-digest", "ABCDEF" * 5 + "AB"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_page_reads_back_as_written(store: Store, case: str) -> None:
    keys, fps = CASES[case]
    page = _page(0, keys, fps, "p" * len(keys))
    store.commit([Merge(page_key_of("fan", WINDOW, 1, 0), page.to_data())])
    store.commit([Merge(page_key_of("fan", WINDOW, 1, 0), {"states": "d" * len(keys)})])
    (record,) = store.query(ITEM, "fan", prefix=f"{WINDOW}/")
    back = ItemPage.from_data(record.data)
    assert back.keys == keys and back.fps == fps and back.states == "d" * len(keys)
    views = read_items([record])
    assert {k: v.item.fingerprint for k, v in views.items()} == dict(zip(keys, fps, strict=True))


def test_a_page_of_100_items_is_one_small_item(store: Store) -> None:
    for seq, case in enumerate(["own ints", "other values"]):
        keys, fps = CASES[case]
        page = _page(seq, keys, fps, "p" * len(keys))
        store.commit([Merge(page_key_of("fan", WINDOW, 1, seq), page.to_data())])
    assert _item_bytes(store, 0) <= 1024  # items that are their own keys: no fingerprint kept
    assert _item_bytes(store, 1) <= 2300  # 16 bytes of fingerprint each (was ~4.3 KB as JSON)


def test_a_run_resumes_from_compact_pages(store: Store) -> None:
    """The second attempt reads the first's pages: done items are skipped, the item that
    raised (pending) comes back uncertain."""
    seen: list[tuple[str, bool]] = []
    fail = {"at": "15"}

    def handler(ctx: RunContext) -> None:
        for item in ctx.items(range(30)):
            if item.key == fail["at"]:
                fail["at"] = ""
                raise RuntimeError("boom")
            seen.append((item.key, item.uncertain))

    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(handler)
    engine = Engine(JobSet([job]), store, EngineSettings(batch_size=10))
    assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.FAILED
    assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.SUCCEEDED
    keys = [key for key, _ in seen]
    assert sorted(keys, key=int) == [str(n) for n in range(30)]  # each once: none redone
    assert [key for key, uncertain in seen if uncertain] == ["15"]  # raised: left pending
    states = {k: v.item.state for k, v in read_items(store.query(ITEM, "fan")).items()}
    assert states == {str(n): "done" for n in range(30)}
