from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest

import cronwarden
from cronwarden.run.engine import EngineSettings
from cronwarden.testing import FakeClock, capture_events, run_once


def test_fake_clock_starts_where_told_and_moves_only_when_told() -> None:
    clock = FakeClock("2026-01-20T02:00Z")
    assert clock() == datetime(2026, 1, 20, 2, 0, tzinfo=UTC)
    assert clock() == clock.now()
    assert clock.advance(90) == datetime(2026, 1, 20, 2, 1, 30, tzinfo=UTC)
    clock.advance(timedelta(hours=1))
    assert clock() == datetime(2026, 1, 20, 3, 1, 30, tzinfo=UTC)
    clock.set(datetime.fromisoformat("2026-01-20T04:00+01:00"))
    assert clock() == datetime(2026, 1, 20, 3, 0, tzinfo=UTC)
    assert clock().tzinfo is UTC


def test_fake_clock_refuses_naive_times_and_going_backwards() -> None:
    with pytest.raises(ValueError, match="naive"):
        FakeClock(datetime(2026, 1, 20, 2, 0))
    clock = FakeClock("2026-01-20T02:00Z")
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)


def test_fake_clock_is_an_engine_clock() -> None:
    clock = FakeClock("2026-01-20T02:00Z")
    settings = EngineSettings(clock=clock)
    clock.advance(5)
    assert settings.clock() == datetime(2026, 1, 20, 2, 0, 5, tzinfo=UTC)


def test_fake_clock_advances_atomically_across_threads() -> None:
    clock = FakeClock("2026-01-20T00:00Z")
    threads = [
        threading.Thread(target=lambda: [clock.advance(1) for _ in range(1000)]) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock() == datetime(2026, 1, 20, 1, 6, 40, tzinfo=UTC)


@cronwarden.job("leaky", cron="0 2 * * *", max_runtime="5m")
def leaky(ctx: cronwarden.RunContext) -> None:
    raise RuntimeError("connect failed: postgresql://svc:hunter2-secret@db/app")


def test_captured_events_are_the_redacted_json_lines_with_run_fields() -> None:
    with capture_events() as events:
        outcome = run_once(leaky, "2026-01-20T02:00Z")
    assert outcome.kind is cronwarden.OutcomeKind.FAILED
    names = [e["event"] for e in events]
    assert names == ["run.started", "run.failed"]
    failed = events[-1]
    assert failed["level"] == "error"
    assert failed["job"] == "leaky" and failed["run_key"] == "leaky:2026-01-20T02:00Z"
    assert failed["run_id"] == outcome.run_id
    assert "hunter2-secret" not in str(events)


def test_capture_restores_the_logger_and_stops_capturing() -> None:
    logger = logging.getLogger("cronwarden")
    before = logger.level
    with capture_events() as events:
        logging.getLogger("cronwarden.mine").info("inside", extra={"event": "my.event"})
    logging.getLogger("cronwarden.mine").warning("outside", extra={"event": "my.event"})
    assert [(e["event"], e["message"]) for e in events] == [("my.event", "inside")]
    assert logger.level == before
    assert all(type(h).__name__ != "_Capture" for h in logger.handlers)


def test_capture_collects_events_from_other_threads() -> None:
    with capture_events() as events:
        worker = threading.Thread(
            target=lambda: logging.getLogger("cronwarden.t").info("x", extra={"event": "t.x"})
        )
        worker.start()
        worker.join()
    assert [e["event"] for e in events] == ["t.x"]
