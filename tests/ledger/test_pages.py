"""Ledger pages: a claimed batch is one record written to claim; its *done* marks ride in the
next batch's page (or, for the last, in the completion);
batches over the store's page size split; marks written before pages (one record per item)
are still read on resume; an operator's resolution outranks the page it resolves and a later
owner's page outranks the resolution. On SQLite (the store-level contracts run on every store
in tests/conformance and tests/ledger/test_cases.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest, Uncertain
from cronwarden.adapters.local import SQLiteStore
from cronwarden.jobs import JobSet
from cronwarden.model.errors import StoreUnavailable
from cronwarden.model.ports import ITEM, RUN, Create, Key, Merge, Op, Store
from cronwarden.model.records import CARRIED, ItemRecord, RunRecord, run_key_of
from cronwarden.run.engine import Engine, EngineSettings
from cronwarden.run.ledger import read_items
from cronwarden.run.quarantine import list_items, resolve
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
    # claim, 3 batch writes (each: the new page, carrying the previous page's done), completion
    assert [len(ops) for ops in item_ops] == [0, 1, 1, 1, 1]
    # a batch write is the run record's compare-and-set and the page: the lock is not written
    batch_writes = store.commits[1:4]
    assert [[op.key.kind for op in ops] for ops in batch_writes] == [[RUN, ITEM]] * 3
    assert [op.fields.get(CARRIED) for ops in batch_writes for op in ops[1:]] == [  # type: ignore[union-attr]
        None,
        {"0": "d" * 100},
        {"1": "d" * 100},
    ]
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
    from cronwarden.run.ledger import WORST_ITEM_BYTES

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
    assert whole[1].fields[CARRIED] == {"0": "ddddd"}  # type: ignore[union-attr]
    updates = [op for op in merges if isinstance(op, Merge) and "keys" not in op.fields]
    assert [op.fields for op in updates] == [{"states": "ddddd"}]  # type: ignore[union-attr]
    store.close()


def test_done_marks_carried_by_the_next_page_are_read_on_resume(tmp_path: Path) -> None:
    """The owner dies after its third batch write (nothing later lands): the first two
    batches' *done* marks exist only inside the next pages (``carried``), and a reader
    (resume, ``ledger list``) sees them done; the third batch stays pending (uncertain)."""
    from cronwarden.testing import Fault, FaultyStore

    inner = SQLiteStore(str(tmp_path / "state.db"))
    # the claim and three batch writes land; every commit after them fails
    dead = FaultyStore(inner, [Fault("unavailable", skip=4, times=10_000)])
    items = [f"i{n:02d}" for n in range(15)]
    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(
        lambda ctx: [None for _ in ctx.items(items)]
    )
    settings = EngineSettings(batch_size=5, store_retry_for=0.0)
    with pytest.raises(StoreUnavailable):  # the failure commit cannot land either
        Engine(JobSet([job]), dead, settings).execute(RunRequest("fan", W))
    pages = inner.query(ITEM, "fan")
    assert [p.data.get(CARRIED) for p in pages] == [None, {"0": "ddddd"}, {"1": "ddddd"}]
    assert states(inner) == {
        **{key: "done" for key in items[:10]},
        **{key: "pending" for key in items[10:]},
    }
    inner.close()


def test_states_that_would_overflow_the_new_page_go_as_updates_of_their_own() -> None:
    from cronwarden.run.ledger import WORST_ITEM_BYTES, Ledger

    limit = 256 + WORST_ITEM_BYTES  # the smallest page size a ledger accepts
    ledger = Ledger(
        job="fan", window=WINDOW, run_key="fan:w", run_id="r", batch_size=50,
        max_page_bytes=limit,
    )  # fmt: skip

    def claim(keys: list[str]) -> list[Op]:
        """Claim ``keys``; the ops of the write that carries the new page(s); mark all done."""
        claimed = ledger.claim(keys, str, None, lambda _: None, lambda _: None)
        sent = ledger.outgoing()
        ledger.acknowledge(sent)
        for slot in claimed.slots:
            ledger.mark_done(slot)
        return sent.ops

    first = claim([f"a{n:02d}" for n in range(50)])
    assert [op.fields.get(CARRIED) for op in first] == [None]  # type: ignore[union-attr]
    # one page filled to 22 bytes of the limit: no room to carry the first page's 50 states
    second = claim([f"{'b' * 180}{n:02d}" for n in range(11)])
    assert [sorted(op.fields) for op in second] == [  # type: ignore[union-attr]
        ["states"],
        ["expire_at", "fence", "fps", "keys", "run_id", "seq", "states"],
    ] or [sorted(op.fields) for op in second] == [  # type: ignore[union-attr]
        ["states"],
        ["fence", "fps", "keys", "run_id", "seq", "states"],
    ]
    assert len(json.dumps(second[1].fields, separators=(",", ":"))) <= limit  # type: ignore[union-attr]
    # a small page has room: the second page's done marks ride in it
    third = claim(["c0"])
    assert [op.fields.get(CARRIED) for op in third] == [{"1": "d" * 11}]  # type: ignore[union-attr]


def test_carried_states_merge_settled_over_pending() -> None:
    from cronwarden.model.records import carried_states, merge_states

    assert merge_states("ppdq", "dppq") == "dpdq"
    assert carried_states(
        [{"fence": 3, CARRIED: {"0": "dpp"}}, {"fence": 3, CARRIED: {"0": "ppr"}}]
    ) == {(3, 0): "dpr"}
    with pytest.raises(ValueError):
        merge_states("pp", "ddd")
