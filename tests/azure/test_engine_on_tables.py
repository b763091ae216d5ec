"""Smoke test: the core engine's run protocol on Table Storage (Azurite)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

import cronwarden
from cronwarden import Engine, EngineSettings, JobSet, OutcomeKind, RunContext, RunRequest
from cronwarden.adapters.azure import TableStore
from cronwarden.emulators.azurite import Azurite
from cronwarden.model.ports import RUN, STATUS, Key
from cronwarden.run.ledger import item_records

pytestmark = pytest.mark.azure

W = datetime(2026, 1, 20, 2, tzinfo=UTC)
ODD_KEYS = ["cust/1", "cust#2", "cust?3", "back\\slash", "tab\there", "dot.ted", "ü✓"]


@pytest.fixture
def store(azurite: Azurite, azurite_table: str) -> Iterator[TableStore]:
    made = TableStore.from_connection_string(azurite.connection_string, azurite_table)
    yield made
    made.close()


def _engine(store: TableStore, *jobs: cronwarden.Job) -> Engine:
    return Engine(JobSet(jobs), store, EngineSettings(batch_size=100))


def test_a_run_succeeds_once_and_a_duplicate_is_recognised(store: TableStore) -> None:
    calls: list[str] = []

    def ok(ctx: RunContext) -> None:
        calls.append(ctx.run_key)

    engine = _engine(store, cronwarden.job("ok", cron="0 * * * *", max_runtime="5m")(ok))
    before = store.round_trips
    assert engine.execute(RunRequest("ok", W)).kind is OutcomeKind.SUCCEEDED
    # claim + completion, plus one read for the completion's Merge maximums (see docs/azure.md)
    assert store.round_trips - before <= 3
    assert engine.execute(RunRequest("ok", W)).kind is OutcomeKind.DUPLICATE
    assert calls == ["ok:2026-01-20T02:00Z"]
    run, status = store.get(Key(RUN, "ok", "2026-01-20T02:00Z")), store.get(Key(STATUS, "ok"))
    assert run is not None and run.data["state"] == "succeeded"
    assert status is not None and status.data["status"] == "succeeded"


def test_ledger_items_with_forbidden_key_characters(store: TableStore) -> None:
    seen: list[str] = []

    def fan(ctx: RunContext) -> None:
        for item in ctx.items([*ODD_KEYS, *(f"n{i}" for i in range(120))]):
            seen.append(item.key)

    engine = _engine(store, cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(fan))
    outcome = engine.execute(RunRequest("fan", W))
    assert outcome.kind is OutcomeKind.SUCCEEDED, outcome
    items = item_records(store, "fan", "2026-01-20T02:00Z")
    assert len(items) == len(seen) == len(ODD_KEYS) + 120
    assert {r.data["state"] for r in items} == {"done"}
    assert {r.key.id.split("/", 1)[1] for r in items} >= set(ODD_KEYS)
