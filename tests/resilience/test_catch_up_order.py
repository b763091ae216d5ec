"""Catch-up with two workers: one tick enqueues ten missed windows (``CatchUp.oldest_first``)
and the current one; two workers serve the queue. Every window runs once, oldest first, and the
current window runs last (it waits while an older window of its tick can still run)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import RunContext
from cronwarden.run.accounting import WindowStatus, window_states
from tests.support.harness import harness

pytestmark = pytest.mark.slow


def test_the_current_window_runs_after_its_catch_up_backlog_with_two_workers(
    tmp_path: Path,
) -> None:
    started: list[datetime] = []
    guard = threading.Lock()

    def handler(ctx: RunContext) -> None:
        with guard:
            started.append(ctx.window)

    job = cronwarden.job(
        "minutely",
        cron="* * * * *",
        max_runtime="1m",
        retry=cronwarden.Retry(3, 0, 0),
        catch_up=cronwarden.CatchUp.oldest_first("10m", max_per_tick=10),
    )(handler)
    h = harness(tmp_path, [job])
    stop = threading.Event()
    workers = [
        threading.Thread(target=h.worker.serve, args=(stop,), kwargs={"wait": 0.1})
        for _ in range(2)
    ]
    try:
        now = datetime.now(UTC)
        requests = h.trigger.tick(job.name, now)
        current = job.schedule.floor(now)
        assert [r.reason for r in requests] == ["catch_up"] * 10 + ["schedule"]
        assert requests[-1].window == current
        windows = [r.window for r in requests]
        assert windows == sorted(windows) and windows[0] == current - timedelta(minutes=10)
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + 120
        while len(started) < len(windows) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started == windows, [w.strftime("%H:%M") for w in started]
        states = window_states(h.store, job, windows[0], windows[-1], datetime.now(UTC))
        assert [s.state for s in states] == [WindowStatus.SUCCEEDED] * len(windows)
    finally:
        stop.set()
        for worker in workers:
            if worker.is_alive():
                worker.join(30)
        h.close()
