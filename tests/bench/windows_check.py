"""``Watcher.check()`` at 10 / 1,000 / 10,000 jobs with 1% of them holding a gap (a window
that never ran between two successes), on SQLite: wall time and round trips per check.

Every job is hourly (60 staggered schedules) with the two latest windows succeeded; the
status records carry what a run's commits write (the accounting counters) and the watcher's
checkpoint one window back. The gap jobs lack the older window's run record (and its count).

    python -m tests.bench.windows_check [--sizes 10 1000 10000] [--repeats 5] [--dir DIR]

Runs against whichever ``cronwarden`` is importable (so the same script measures before and
after a change); prints one JSON line per size."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cronwarden import JobSet, Watcher, job
from cronwarden.adapters.local import SQLiteStore
from cronwarden.ports import RUN, STATUS, Create, Key, Merge
from cronwarden.records import iso

SCHEDULES = 60


def _jobs(n: int) -> JobSet:
    return JobSet(
        job(f"job-{i:05d}", cron=f"{i % SCHEDULES} * * * *", max_runtime="10m")(lambda ctx: None)
        for i in range(n)
    )


def _seed(store: SQLiteStore, jobs: JobSet, now: datetime) -> int:
    gaps = 0
    for i, j in enumerate(jobs):
        latest = j.schedule.floor(now)
        previous = j.schedule.floor(latest - timedelta(seconds=1))
        older = j.schedule.floor(previous - timedelta(seconds=1))
        gap = i % 100 == 50
        gaps += gap
        ops: list[Any] = []
        for window in (previous, latest):
            if gap and window == previous:
                continue
            text = window.strftime("%Y-%m-%dT%H:%MZ")
            ops.append(
                Create(
                    Key(RUN, j.name, text),
                    {
                        "job": j.name,
                        "window": text,
                        "run_key": f"{j.name}:{text}",
                        "state": "succeeded",
                        "attempt": 1,
                        "fence": 1,
                        "finished_at": iso(window + timedelta(minutes=1)),
                    },
                )
            )
        recorded = 1 + len(ops)  # the older window's record, plus these
        ops.append(
            Merge(
                Key(STATUS, j.name),
                {
                    "job_name": j.name,
                    "status": "succeeded",
                    "window": latest.strftime("%Y-%m-%dT%H:%MZ"),
                    "finished_at": iso(latest + timedelta(minutes=1)),
                    "last_success_at": iso(latest + timedelta(minutes=1)),
                    "last_success_window_ts": int(latest.timestamp()),
                    "consecutive_failures": 0,
                    "skips_since_success": 0,
                    "first_seen_at": iso(now - timedelta(days=1)),
                    "alerts": [],
                    "windows_recorded": recorded,
                    "windows_open": 0,
                    "accounted_through_ts": int(older.timestamp()),
                    "accounted_base": 1,
                },
            )
        )
        store.commit(ops)
    return gaps


def measure(size: int, repeats: int, directory: Path) -> dict[str, Any]:
    path = directory / f"windows-{size}.db"
    path.unlink(missing_ok=True)
    store = SQLiteStore(str(path))
    jobs = _jobs(size)
    now = datetime.now(UTC)
    gaps = _seed(store, jobs, now)
    trips: Counter[str] = Counter()
    store.add_observer(lambda rt: trips.update([f"{rt.operation}:{rt.kind}"]))
    watcher = Watcher(jobs, store, notifiers=[], clock=lambda: now)
    first = watcher.check()  # fires the transitions once (writes), then steady state
    times, per_check = [], []
    missed = 0
    for _ in range(repeats):
        trips.clear()
        began = time.perf_counter()
        report = watcher.check()
        times.append(time.perf_counter() - began)
        per_check.append(dict(trips))
        missed = sum(1 for a in report.active if a.kind.value == "missed")
    store.close()
    times.sort()
    return {
        "jobs": size,
        "gap_jobs": gaps,
        "missed_alerts": missed,
        "first_check_alerts": len(first.fired),
        "check_ms_median": round(times[len(times) // 2] * 1000, 1),
        "check_ms_min": round(times[0] * 1000, 1),
        "round_trips": per_check[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", type=int, default=[10, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(args.dir or tmp)
        for size in args.sizes:
            print(json.dumps(measure(size, args.repeats, directory)), flush=True)


if __name__ == "__main__":
    main()
