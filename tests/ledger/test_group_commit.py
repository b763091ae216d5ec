"""The ledger's group commit of *done* marks inside a batch, in one process on SQLite: what is
durable while the loop runs (read from the store inside the handler), for slow items, a long
item, quick items and ``flush_every=None``; and the argument's validation."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest
from cronwarden.adapters.local import SQLiteStore
from cronwarden.jobs import JobSet
from cronwarden.model.ports import ITEM
from cronwarden.run.engine import Engine
from cronwarden.run.ledger import read_items
from tests.support.harness import at

W = at("2026-01-20T02:00Z")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    made = SQLiteStore(str(tmp_path / "state.db"))
    yield made
    made.close()


def durable_done(store: SQLiteStore) -> set[str]:
    found = read_items(store.query(ITEM, "fan"))
    return {key for key, view in found.items() if view.item.state == "done"}


def run(store: SQLiteStore, handler: Callable[[RunContext], None]) -> None:
    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(handler)
    outcome = Engine(JobSet([job]), store).execute(RunRequest("fan", W))
    assert outcome.kind is OutcomeKind.SUCCEEDED, outcome


def test_slow_items_leave_at_most_one_done_item_unwritten(store: SQLiteStore) -> None:
    """Items of 5 ms (the default flush_every): when item n starts, items up to n-2 are durably
    done: a crash then redoes at most item n-1 and item n (the bound of 2)."""
    unwritten: list[int] = []

    def handler(ctx: RunContext) -> None:
        for item in ctx.items([f"i{n:02d}" for n in range(12)]):
            n = int(item.key[1:])
            done = durable_done(store)
            unwritten.append(len({f"i{k:02d}" for k in range(n)} - done))
            time.sleep(0.005)  # the side effect's duration (the workload)

    run(store, handler)
    assert max(unwritten) <= 1, unwritten
    assert durable_done(store) == {f"i{n:02d}" for n in range(12)}


def test_a_long_item_is_written_before_the_next_starts(store: SQLiteStore) -> None:
    seen: list[set[str]] = []

    def handler(ctx: RunContext) -> None:
        for item in ctx.items(["long", "next"]):
            seen.append(durable_done(store))
            if item.key == "long":
                time.sleep(0.26)  # over 250 ms: its mark is not left for a second item

    run(store, handler)
    assert seen == [set(), {"long"}]


def test_quick_items_share_the_batch_write_and_none_disables_group_commit(
    store: SQLiteStore,
) -> None:
    """A batch of trivial items writes nothing between its page and the next (no matter the
    timing: one stall does not count); with ``flush_every=None`` slow items do not either."""
    trips: list[int] = []

    def handler(ctx: RunContext) -> None:
        for _ in ctx.items(range(50), batch_size=50):
            trips.append(store.round_trips)
        for _ in ctx.items([f"s{n}" for n in range(6)], flush_every=None):
            trips.append(store.round_trips)
            time.sleep(0.005)

    run(store, handler)
    assert len(set(trips[:50])) == 1  # quick: no write inside the batch
    assert len(set(trips[50:])) == 1  # flush_every=None: the page only


@pytest.mark.parametrize("bad", [-1, "5ms", True, float("nan")])
def test_flush_every_must_be_seconds_or_none(store: SQLiteStore, bad: object) -> None:
    errors: list[str] = []

    def handler(ctx: RunContext) -> None:
        with pytest.raises(ValueError, match="flush_every must be seconds") as info:
            next(iter(ctx.items(range(3), flush_every=bad)))  # type: ignore[arg-type]
        errors.append(str(info.value))

    run(store, handler)
    assert errors and "\n" not in errors[0]
