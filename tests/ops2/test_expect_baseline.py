"""Expectations on successful runs (*succeeded, suspicious*) and the duration baseline
(p50 / p95 in the status record, a ``slow`` alert), through the engine and the watcher on
the local provider."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import Expect, OutcomeKind, RunContext, RunRequest, Watcher
from cronwarden.model.errors import InvalidJobDefinition
from cronwarden.model.ports import RUN, STATUS, Key, Merge
from cronwarden.run.baseline import BASELINE_RUNS, baseline_fields, baseline_of, samples, slot_for
from tests.support.harness import FakeClock, Harness, at, harness

W = at("2026-01-20T09:00Z")
HOUR = timedelta(hours=1)


def _rows_job(**options: Any) -> cronwarden.Job:
    def export(ctx: RunContext) -> None:
        ctx.count("rows_written", int(ctx.payload.get("rows", 0)))
        if ctx.payload.get("sleep"):
            time.sleep(float(ctx.payload["sleep"]))  # the run's own work, not synchronisation
        if ctx.payload.get("wait"):
            gate.wait(30)

    return cronwarden.job(
        "export", cron="0 * * * *", max_runtime="2h", owner="team-data", **options
    )(export)


gate = threading.Event()


@pytest.fixture
def make(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def build(**options: Any) -> Harness:
        h = harness(tmp_path, [_rows_job(**options)], clock=clock)
        made.append(h)
        return h

    yield build
    gate.set()
    for h in made:
        h.close()


def _status(h: Harness) -> dict[str, Any]:
    record = h.store.get(Key(STATUS, "export"))
    assert record is not None
    return dict(record.data)


def test_expect_is_checked_at_import() -> None:
    with pytest.raises(InvalidJobDefinition, match="exceeds"):
        Expect(min_items=5, max_items=1)
    with pytest.raises(InvalidJobDefinition, match="min, max"):
        Expect(counters={"rows": 1})  # type: ignore[dict-item]
    with pytest.raises(InvalidJobDefinition, match="slow_factor"):
        _rows_job(slow_factor=0.5)
    assert Expect(min_items=1).breaches({}, 5) == ["items_done 0 < 1"]
    assert Expect(counters={"rows": (None, 10)}).breaches({"rows": 11}, 5) == ["rows 11 > 10"]
    assert Expect(max_duration="1s").breaches({}, 2500) == ["duration 2500 ms > 1000 ms"]


def test_zero_rows_is_recorded_succeeded_suspicious_and_the_watcher_raises_it(
    make: Callable[..., Harness], clock: FakeClock, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    h = make(expect=Expect(counters={"rows_written": (1, None)}))
    clock.set(W + timedelta(minutes=5))
    before = h.store.round_trips
    outcome = h.engine.execute(RunRequest("export", W, payload={"rows": 0}))
    assert h.store.round_trips - before == 2  # claim, complete: no extra round trip
    assert outcome.kind is OutcomeKind.SUCCEEDED
    assert outcome.detail == "suspicious: rows_written 0 < 1"
    run = h.store.get(Key(RUN, "export", "2026-01-20T09:00Z"))
    assert run is not None and run.data["state"] == "succeeded"
    assert run.data["suspicious"] == ["rows_written 0 < 1"]
    status = _status(h)
    assert status["suspicious"] == ["rows_written 0 < 1"]
    assert status["suspicious_run_key"] == "export:2026-01-20T09:00Z"
    assert any(line.get("event") == "run.suspicious" for line in log_lines())

    received: list[cronwarden.Alert] = []

    class Sink:
        def notify(self, alert: cronwarden.Alert) -> None:
            received.append(alert)

    watcher = Watcher(h.jobs, h.store, h.queue, notifiers=[Sink()], clock=clock, hooks=[])
    report = watcher.check()
    [alert] = [a for a in report.fired if a.kind.value == "suspicious"]
    assert "succeeded but looks wrong: rows_written 0 < 1" in alert.text
    assert "team-data" in alert.text  # owner on every alert
    assert watcher.check().fired == []  # transitions only

    # a later run that meets the expectation clears it, and the watcher announces recovery
    clock.set(W + HOUR + timedelta(minutes=5))
    assert h.engine.execute(RunRequest("export", W + HOUR, payload={"rows": 7})).detail == ""
    assert _status(h)["suspicious"] is None
    report = watcher.check()
    assert [a.kind.value for a in report.recovered] == ["suspicious"]
    assert [a.kind.value for a in received] == ["suspicious", "suspicious"]


def test_a_late_catch_up_run_does_not_hide_a_newer_suspicious_one(
    make: Callable[..., Harness], clock: FakeClock
) -> None:
    h = make(expect=Expect(counters={"rows_written": (1, None)}))
    clock.set(W + timedelta(minutes=5))
    h.engine.execute(RunRequest("export", W, payload={"rows": 0}))
    # a catch-up of an older window that meets the expectation completes later
    clock.set(W + timedelta(minutes=30))
    old = RunRequest("export", W - 5 * HOUR, reason="catch_up", payload={"rows": 3})
    assert h.engine.execute(old).kind is OutcomeKind.SUCCEEDED
    assert _status(h)["suspicious"] == ["rows_written 0 < 1"]


def test_each_success_writes_its_ring_slot_in_the_completion_commit(
    make: Callable[..., Harness], clock: FakeClock
) -> None:
    h = make()
    job = h.jobs["export"]
    for index in range(BASELINE_RUNS + 3):
        window = W + index * HOUR
        clock.set(window + timedelta(minutes=1))
        assert h.engine.execute(RunRequest("export", window)).kind is OutcomeKind.SUCCEEDED
    status = _status(h)
    kept = samples(job, status)
    assert len(kept) == BASELINE_RUNS  # the ring holds the last N windows, oldest overwritten
    newest = int((W + (BASELINE_RUNS + 2) * HOUR).timestamp())
    assert {s.window_ts for s in kept} == {newest - i * 3600 for i in range(BASELINE_RUNS)}
    assert baseline_of(job, status) is not None


def test_baseline_quantiles_and_stale_samples() -> None:
    job = _rows_job()
    status: dict[str, Any] = {}
    for index, ms in enumerate([100, 110, 120, 130, 140, 150, 1000]):
        status.update(baseline_fields(job, W + index * HOUR, ms))
    base = baseline_of(job, status)
    assert base is not None and base.samples == 7
    assert base.p50_ms == 130
    assert 150 < base.p95_ms < 1000
    assert "p50 130 ms" in base.describe()
    # a sample from long ago (outside N intervals of the newest) is ignored
    status["dur_slot_99"] = f"{int((W - 100 * HOUR).timestamp())}:5"
    assert baseline_of(job, status) == base
    # fewer than 5 recent successes: no baseline yet
    assert baseline_of(job, {k: v for k, v in list(status.items())[:4]}) is None
    assert slot_for(job, W) != slot_for(job, W + HOUR)


def test_slow_alert_for_a_finished_run_and_for_a_running_one(
    make: Callable[..., Harness], clock: FakeClock
) -> None:
    h = make(slow_factor=4)
    job = h.jobs["export"]
    # six earlier successes of 100 ms each (seeded: wall-clock durations of real runs vary)
    seeded: dict[str, Any] = {}
    for index in range(6):
        seeded.update(baseline_fields(job, W + index * HOUR, 100))
    h.store.commit([Merge(Key(STATUS, "export"), seeded)])
    clock.set(W + 5 * HOUR + timedelta(minutes=1))
    h.engine.execute(RunRequest("export", W + 5 * HOUR))  # its own slot: ~0 ms
    watcher = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock, hooks=[])
    assert "slow" not in {a.kind.value for a in watcher.check().active}

    slow_window = W + 6 * HOUR
    clock.set(slow_window + timedelta(minutes=1))
    h.engine.execute(RunRequest("export", slow_window, payload={"sleep": 0.5}))
    report = watcher.check()
    [slow] = [a for a in report.fired if a.kind.value == "slow"]
    assert "over 4x its usual duration (p50" in slow.text

    clock.set(slow_window + HOUR + timedelta(minutes=1))
    h.engine.execute(RunRequest("export", slow_window + HOUR))
    assert [a.kind.value for a in watcher.check().recovered] == ["slow"]

    # a run still going after 4 x p50 is slow before it is stuck
    gate.clear()
    window = slow_window + 2 * HOUR
    clock.set(window + timedelta(minutes=1))
    worker = threading.Thread(
        target=h.engine.execute, args=(RunRequest("export", window, payload={"wait": 1}),)
    )
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while _status(h).get("status") != "running":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.01)
        clock.advance(timedelta(minutes=5))
        report = watcher.check()
        assert {a.kind.value for a in report.active} >= {"slow"}
        assert "stuck" not in {a.kind.value for a in report.active}
    finally:
        gate.set()
        worker.join(30)


def test_status_shows_p50_p95_beside_the_last_duration(
    make: Callable[..., Harness], clock: FakeClock, tmp_path: Path
) -> None:
    h = make()
    job = h.jobs["export"]
    seeded: dict[str, Any] = {"duration_ms": 130}
    for index, ms in enumerate([100, 110, 120, 130, 140]):
        seeded.update(baseline_fields(job, W + index * HOUR, ms))
    h.store.commit([Merge(Key(STATUS, "export"), seeded)])
    watcher = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock, hooks=[])
    [item] = watcher.evaluate(h.store.query(STATUS), clock(), None)[0]
    assert item.duration_text == "130 ms (p50 120 ms / p95 138 ms over 5 runs)"


def test_a_backfill_of_old_windows_leaves_the_recent_ring_alone(
    make: Callable[..., Harness], clock: FakeClock
) -> None:
    h = make()
    job = h.jobs["export"]
    for index in range(5):
        window = W + index * HOUR
        clock.set(window + timedelta(minutes=1))
        h.engine.execute(RunRequest("export", window))
    before = samples(job, _status(h))
    old = RunRequest("export", W - BASELINE_RUNS * HOUR, reason="backfill")
    assert h.engine.execute(old).kind is OutcomeKind.SUCCEEDED
    assert samples(job, _status(h)) == before
