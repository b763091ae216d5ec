"""The local runtime: the scheduler fires due windows in the job's timezone; the runner's
workers execute them; a clock jump fires the latest window only (catch-up does the rest)."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

import cronwarden
from cronwarden import EngineSettings, JobSet, LocalRunner
from cronwarden.adapters.local import LocalProvider
from cronwarden.ports import RUN
from cronwarden.runtime import Scheduler
from tests.support.harness import FakeClock, at
from tests.support.procs import poll


def test_scheduler_fires_each_due_window_in_the_jobs_timezone() -> None:
    berlin = cronwarden.job("berlin", cron="0 9 * * *", timezone="Europe/Berlin", max_runtime="1m")(
        lambda ctx: None
    )
    clock = FakeClock(at("2026-03-27T07:59:59Z"))
    ticks: list[tuple[str, datetime]] = []
    stop = threading.Event()
    scheduler = Scheduler(
        JobSet([berlin]), lambda n, w: ticks.append((n, w)), stop, clock=clock, max_sleep=0.02
    )
    scheduler.start()
    try:
        clock.set(at("2026-03-27T08:00:01Z"))  # 09:00 CET
        poll(lambda: len(ticks) == 1, deadline=10, what="first tick")
        clock.set(at("2026-03-30T07:00:05Z"))  # 09:00 CEST after the DST change; 3 days later
        poll(lambda: len(ticks) == 2, deadline=10, what="tick after the jump")
    finally:
        stop.set()
        scheduler.join(5)
    assert ticks == [("berlin", at("2026-03-27T08:00Z")), ("berlin", at("2026-03-30T07:00Z"))]


def test_local_runner_serves_scheduled_windows(tmp_path: Path) -> None:
    done: list[str] = []
    every_minute = cronwarden.job("tick", cron="* * * * *", max_runtime="1m")(
        lambda ctx: done.append(ctx.run_key)
    )
    clock = FakeClock(at("2026-01-20T10:00:30Z"))
    provider = LocalProvider(str(tmp_path / "state.db"))
    runner = LocalRunner(
        JobSet([every_minute]), provider, workers=2, settings=EngineSettings(clock=clock)
    )
    thread = threading.Thread(target=runner.serve, kwargs={"watch_every": None}, daemon=True)
    thread.start()
    try:
        clock.set(at("2026-01-20T10:01:00Z"))
        poll(lambda: done, deadline=20, what="the 10:01 run")
        clock.set(at("2026-01-20T10:02:00Z"))
        poll(lambda: len(done) == 2, deadline=20, what="the 10:02 run")
    finally:
        runner.stop()
        thread.join(10)
    assert done == ["tick:2026-01-20T10:01Z", "tick:2026-01-20T10:02Z"]
    states = [r.data["state"] for r in provider.store().query(RUN, "tick")]
    provider.close()
    assert states == ["succeeded", "succeeded"]
