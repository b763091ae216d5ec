from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext
from cronwarden.model.errors import MalformedRunRequest
from cronwarden.model.ports import RUN, STATUS, Key
from cronwarden.run.ledger import item_records
from cronwarden.testing import FakeClock, MemoryStore, run_once

W = "2026-01-20T02:00Z"
seen: list[dict[str, Any]] = []


@cronwarden.job("export", cron="0 2 * * *", max_runtime="10m")
def export(ctx: RunContext) -> None:
    seen.append({"window": ctx.window, "payload": ctx.payload, "attempt": ctx.attempt})
    for _ in ctx.items([{"id": "a"}, {"id": "b"}, {"id": "c"}], key="id"):
        pass


@cronwarden.job(
    "flaky", cron="0 2 * * *", max_runtime="10m", retry=cronwarden.Retry(max_attempts=2)
)
def flaky(ctx: RunContext) -> None:
    raise ValueError("upstream said no")


@cronwarden.job("hopeless", cron="0 2 * * *", max_runtime="10m")
def hopeless(ctx: RunContext) -> None:
    raise cronwarden.PermanentError("bad input")


def test_a_run_succeeds_through_the_real_engine_and_writes_its_records() -> None:
    seen.clear()
    store = MemoryStore()
    outcome = run_once(export, W, store=store, payload={"tenant": "t1"})
    assert outcome.kind is OutcomeKind.SUCCEEDED
    assert outcome.run_key == "export:2026-01-20T02:00Z"
    assert outcome.counters == {"items_done": 3}
    assert seen == [
        {
            "window": datetime(2026, 1, 20, 2, 0, tzinfo=UTC),
            "payload": {"tenant": "t1"},
            "attempt": 1,
        }
    ]
    run = store.get(Key(RUN, "export", W))
    assert run is not None and run.data["state"] == "succeeded"
    assert store.get(Key(STATUS, "export")) is not None
    assert len(item_records(store, "export")) == 3


def test_a_second_run_on_the_same_store_is_a_duplicate_and_runs_nothing() -> None:
    store = MemoryStore()
    assert run_once(export, W, store=store).kind is OutcomeKind.SUCCEEDED
    seen.clear()
    assert run_once(export, W, store=store).kind is OutcomeKind.DUPLICATE
    assert seen == []


def test_failures_become_outcomes_with_retry_then_dead_letter() -> None:
    store = MemoryStore()
    clock = FakeClock(W)
    first = run_once(flaky, W, store=store, clock=clock)
    assert first.kind is OutcomeKind.FAILED and first.delay > 0
    assert "upstream said no" in first.detail
    clock.advance(timedelta(seconds=first.delay))
    second = run_once(flaky, W, store=store, clock=clock)
    assert second.kind is OutcomeKind.DEAD_LETTERED


def test_a_permanent_error_dead_letters_at_once() -> None:
    outcome = run_once(hopeless, W)
    assert outcome.kind is OutcomeKind.DEAD_LETTERED
    assert "bad input" in outcome.detail


def test_the_default_clock_stands_at_the_window() -> None:
    store = MemoryStore()
    run_once(export, W, store=store)
    run = store.get(Key(RUN, "export", W))
    assert run is not None
    assert str(run.data["run_id"]).startswith("20260120T0200")


def test_a_time_that_is_not_a_window_is_refused() -> None:
    with pytest.raises(MalformedRunRequest, match="not a window"):
        run_once(export, "2026-01-20T02:30Z")
