"""[windows] Case 8: catch-up and backfill run oldest-first per job with any number of
workers (two worker threads over a 12-window backlog on the local queue)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import cronwarden
from cronwarden import RunContext, RunRequest
from cronwarden.run.accounting import WindowStatus, window_states
from tests.support.harness import harness


def test_backfill_backlog_runs_oldest_first_with_two_workers(tmp_path: Path) -> None:
    started: list[datetime] = []
    guard = threading.Lock()

    def handler(ctx: RunContext) -> None:
        with guard:
            started.append(ctx.window)
        time.sleep(0.02)

    job = cronwarden.job(
        "backlog", cron="*/5 * * * *", max_runtime="1m", retry=cronwarden.Retry(3, 0, 0)
    )(handler)
    h = harness(tmp_path, [job])
    try:
        latest = job.schedule.floor(datetime.now(UTC) - timedelta(hours=2))
        windows = [latest - timedelta(minutes=5 * i) for i in range(12)][::-1]
        # published newest first on purpose: the order of the queue must not matter
        requests = [RunRequest(job.name, w, reason="backfill") for w in windows]
        h.trigger.publish_oldest_first(requests[::-1])
        stop = threading.Event()
        workers = [
            threading.Thread(target=h.worker.serve, args=(stop,), kwargs={"wait": 0.1})
            for _ in range(2)
        ]
        for w in workers:
            w.start()
        deadline = time.monotonic() + 120
        try:
            while len(started) < 12 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop.set()
            for w in workers:
                w.join(30)
        assert len(started) == 12, started
        inverted = sum(1 for i, a in enumerate(started) for b in started[i + 1 :] if b < a)
        assert inverted == 0, started
        states = window_states(h.store, job, windows[0], windows[-1], datetime.now(UTC))
        assert [s.state for s in states] == [WindowStatus.SUCCEEDED] * 12
    finally:
        h.close()
