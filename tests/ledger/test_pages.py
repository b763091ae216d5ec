"""Ledger pages: a claimed batch is one record written to claim and once more to mark done;
batches over the store's page size split; marks written before pages (one record per item)
are still read on resume; an operator's resolution outranks the page it resolves and a later
owner's page outranks the resolution. On SQLite (the store-level contracts run on every store
in tests/conformance and tests/ledger/test_cases.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest, Uncertain
from cronwarden.adapters.local import SQLiteStore
from cronwarden.engine import Engine, EngineSettings
from cronwarden.jobs import JobSet
from cronwarden.ledger import read_items
from cronwarden.ports import ITEM, Create, Key, Merge, Op, Store
from cronwarden.quarantine import list_items, resolve
from cronwarden.records import ItemRecord, RunRecord, run_key_of
from tests.support.harness import at

W = at("2026-01-20T02:00Z")
WINDOW = "2026-01-20T02:00Z"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    made = SQLiteStore(str(tmp_path / "state.db"))
    yield made
    made.close()


class Recording(SQLiteStore):
    """SQLite, keeping every committed op list."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.commits: list[list[Op]] = []

    def commit(self, ops: list[Op]) -> list[int]:  # type: ignore[override]
        versions = super().commit(ops)
        self.commits.append(list(ops))
        return versions  # type: ignore[return-value]


def fan(store: Store, items: list[str], *, batch: int = 100, **settings: object) -> Counter[str]:
    effects: Counter[str] = Counter()

    def handler(ctx: RunContext) -> None:
        for item in ctx.items(items):
            effects[item.key] += 1

    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(handler)
    engine = Engine(JobSet([job]), store, EngineSettings(batch_size=batch, **settings))  # type: ignore[arg-type]
    outcome = engine.execute(RunRequest("fan", W))
    assert outcome.kind is OutcomeKind.SUCCEEDED, outcome
    return effects


def states(store: Store) -> dict[str, str]:
    found = read_items(store.query(ITEM, "fan", prefix=f"{WINDOW}/"))
    return {key: view.item.state for key, view in found.items()}


def test_a_batch_costs_one_record_to_claim_and_one_to_mark_done(tmp_path: Path) -> None:
    store = Recording(str(tmp_path / "state.db"))
    items = [f"i{n:03d}" for n in range(250)]
    effects = fan(store, items, batch=100)
    item_ops = [[op for op in ops if op.key.kind == ITEM] for ops in store.commits]
    # claim, 3 batch writes (each: the new page + the previous page's done), completion
    assert [len(ops) for ops in item_ops] == [0, 1, 2, 2, 1]
    assert len(store.query(ITEM, "fan")) == 3
    assert effects == Counter(items)
    assert set(states(store).values()) == {"done"} and len(states(store)) == 250
    store.close()


def test_a_batch_over_the_page_size_is_split(tmp_path: Path) -> None:
    store = Recording(str(tmp_path / "state.db"))
    store.capabilities = replace(store.capabilities, max_page_bytes=3000)
    items = [f"{'k' * 150}-{n:03d}" for n in range(40)]
    effects = fan(store, items, batch=40)
    pages = store.query(ITEM, "fan")
    assert len(pages) > 1
    # every page within the limit, as the store holds it
    from cronwarden.ledger import WORST_ITEM_BYTES

    limit = max(3000, 256 + WORST_ITEM_BYTES)
    import json

    assert all(len(json.dumps(p.data, separators=(",", ":"))) <= limit for p in pages)
    assert effects == Counter(items)
    assert states(store) == {key: "done" for key in items}
    store.close()


def _old_record(key: str, state: str, run_id: str) -> Op:
    """A mark as the version before pages wrote it: one record per item."""
    data = ItemRecord(key, cronwarden.model.fingerprint(key), state, run_id).to_data()
    return Create(Key(ITEM, "fan", f"{WINDOW}/{key}"), data)


def _dead_run(store: Store, run_id: str = "dead") -> None:
    """The window's run, left running by an owner whose lease expired."""
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    run = RunRecord(
        job="fan",
        window=WINDOW,
        run_key=f"fan:{WINDOW}",
        owner="gone",
        run_id=run_id,
        fence=1,
        attempt=1,
        lease_expires=long_ago,
        started_at=long_ago,
        first_started_at=long_ago,
    )
    store.commit([Create(run_key_of("fan", WINDOW), run.to_data())])


@pytest.mark.parametrize("uncertain", [Uncertain.REDO, Uncertain.QUARANTINE])
def test_marks_written_before_pages_are_read_on_resume(
    store: SQLiteStore, uncertain: Uncertain
) -> None:
    """A window in flight across the upgrade: its old per-item marks still count."""
    _dead_run(store)
    store.commit(
        [
            _old_record("i0", "done", "dead"),
            _old_record("i1", "done", "dead"),
            _old_record("i2", "pending", "dead"),
            _old_record("i3", "released", "dead"),
        ]
    )
    items = [f"i{n}" for n in range(6)]
    effects = fan(store, items, uncertain=uncertain)
    if uncertain is Uncertain.REDO:
        assert effects == Counter(["i2", "i3", "i4", "i5"])
        assert states(store) == {key: "done" for key in items}
    else:
        assert effects == Counter(["i3", "i4", "i5"])
        assert states(store) == {**{key: "done" for key in items}, "i2": "quarantined"}
        listed = list_items(store, "fan", window=WINDOW)
        assert [(entry.window, entry.item.key) for entry in listed] == [(WINDOW, "i2")]


def test_a_resolution_outranks_its_page_and_a_later_page_outranks_it(store: SQLiteStore) -> None:
    """Quarantined in a page; resolved ``redo`` (the item's own record); the next attempt's page
    marks it done again."""
    _dead_run(store)
    stale = ItemRecord("i1", cronwarden.model.fingerprint("i1"), "pending", "dead")
    store.commit([Create(Key(ITEM, "fan", f"{WINDOW}/i1"), stale.to_data())])
    fan(store, ["i0", "i1", "i2"], uncertain=Uncertain.QUARANTINE)
    assert states(store)["i1"] == "quarantined"
    now = datetime.now(UTC)
    done = resolve(store, "fan", WINDOW, ["i1"], as_="redo", reason="not sent", now=now)
    assert done.rerun is not None
    assert states(store)["i1"] == "released"
    listed = list_items(store, "fan", window=WINDOW, state=None)
    resolution = {e.item.key: e.resolution for e in listed}["i1"]
    assert resolution is not None and resolution["reason"] == "not sent"
    effects = fan(store, ["i0", "i1", "i2"])
    assert effects == Counter(["i1"])
    assert states(store) == {"i0": "done", "i1": "done", "i2": "done"}


def test_item_keys_may_not_look_like_pages(store: SQLiteStore) -> None:
    def handler(ctx: RunContext) -> None:
        for _ in ctx.items(["~page~0000000001.000000"]):
            pass

    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(handler)
    outcome = Engine(JobSet([job]), store).execute(RunRequest("fan", W))
    assert outcome.kind in (OutcomeKind.FAILED, OutcomeKind.DEAD_LETTERED)
    assert "~page~" in outcome.detail


def test_pages_are_whole_or_states_only(tmp_path: Path) -> None:
    """A page is written whole once, then only its states change."""
    store = Recording(str(tmp_path / "state.db"))
    fan(store, [f"i{n}" for n in range(10)], batch=5)
    merges = [op for ops in store.commits for op in ops if op.key.kind == ITEM]
    assert all(isinstance(op, Merge) for op in merges)
    whole = [op for op in merges if isinstance(op, Merge) and "keys" in op.fields]
    assert len(whole) == 2 and all(op.fields["states"] == "ppppp" for op in whole)  # type: ignore[union-attr]
    updates = [op for op in merges if isinstance(op, Merge) and "keys" not in op.fields]
    assert [op.fields for op in updates] == [{"states": "ddddd"}] * 2  # type: ignore[union-attr]
    store.close()
