"""Window accounting at scale: ``Watcher.check()`` at 10 / 1,000 / 10,000 jobs with 1% of them
holding a gap (a window that never ran between two successes), on each store: wall time, round
trips per check (by operation and record kind), and gaps reported against gaps seeded.

Every job is hourly (60 staggered schedules) with its two latest windows succeeded; the status
record carries what a run's commits write (the accounting counters) and the watcher's
checkpoint one window back. A gap job lacks the older of the two run records (and its count).
Everything is seeded through the store's public ``commit`` (one commit per job: its run records
and its status), from a thread pool on the network stores. The section reports, it does not
assert: a store that reports fewer gaps than were seeded shows it in the table."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwarden import Job, JobSet, Watcher, job
from cronwarden.model.ports import RUN, STATUS, Create, Key, Merge, Op, RoundTrip, Store
from cronwarden.model.records import iso

from .emulators import Emulators
from .stats import summary

SIZES = (10, 1_000, 10_000)
REPEATS = 3
SCHEDULES = 60  #: hourly jobs spread over the hour: 60 distinct schedules
GAP_EVERY = 100  #: 1% of the jobs hold a gap
LOCAL = ("sqlite", "postgres", "redis")  #: seeded from one thread; the others from a pool


def _job(i: int) -> Job:
    return job(f"job-{i:05d}", cron=f"{i % SCHEDULES} * * * *", max_runtime="10m")(lambda ctx: None)


def _is_gap(i: int) -> bool:
    return i % GAP_EVERY == GAP_EVERY // 2


def _ops(j: Job, gap: bool, now: datetime) -> list[Op]:
    """One job's records: its two latest windows' runs (the older missing on a gap job) and a
    status whose checkpoint is one window further back."""
    latest = j.schedule.floor(now)
    previous = j.schedule.floor(latest - timedelta(seconds=1))
    older = j.schedule.floor(previous - timedelta(seconds=1))
    ops: list[Op] = []
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
    return ops


def _seed(name: str, store: Store, jobs: list[Job], first: int, now: datetime) -> int:
    """Commit ``jobs`` (numbered from ``first``); returns how many of them hold a gap."""

    def one(pair: tuple[int, Job]) -> None:
        i, j = pair
        store.commit(_ops(j, _is_gap(i), now))

    pairs = list(enumerate(jobs, start=first))
    if name in LOCAL:
        for pair in pairs:
            one(pair)
    else:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, pairs))
    return sum(1 for i, _ in pairs if _is_gap(i))


def _missed(report: Any) -> set[str]:
    return {a.job for a in report.active if a.kind.value == "missed"}


def measure(
    emulators: Emulators, stores: list[str], sizes: tuple[int, ...] = SIZES, repeats: int = REPEATS
) -> dict[str, Any]:
    all_jobs = [_job(i) for i in range(max(sizes))]
    gap_names = {j.name for i, j in enumerate(all_jobs) if _is_gap(i)}
    results: dict[str, Any] = {}
    for name in stores:
        rows: list[dict[str, Any]] = []
        try:
            with emulators.store(name) as store:
                trips: Counter[str] = Counter()

                def count(rt: RoundTrip, trips: Counter[str] = trips) -> None:
                    trips[f"{rt.operation}:{rt.kind}" if rt.kind else rt.operation] += 1

                store.add_observer(count)
                now = datetime.now(UTC)
                seeded = gaps = 0
                for size in sizes:
                    began = time.perf_counter()
                    gaps += _seed(name, store, all_jobs[seeded:size], seeded, now)
                    seed_s = time.perf_counter() - began
                    seeded = size
                    watcher = Watcher(
                        JobSet(all_jobs[:size]), store, notifiers=[], clock=lambda now=now: now
                    )
                    trips.clear()
                    began = time.perf_counter()
                    first = watcher.check()  # fires the transitions once (writes)
                    first_s = time.perf_counter() - began
                    first_trips = dict(trips)
                    checks, totals = [], []
                    steady: dict[str, int] = {}
                    reported: set[str] = set()
                    for _ in range(repeats):
                        trips.clear()
                        began = time.perf_counter()
                        report = watcher.check()
                        checks.append(time.perf_counter() - began)
                        steady = dict(trips)
                        totals.append(sum(steady.values()))
                        reported = _missed(report)
                    expected = {n for n in gap_names if n in {j.name for j in all_jobs[:size]}}
                    check_s = summary(checks)
                    rows.append(
                        {
                            "jobs": size,
                            "gaps_seeded": gaps,
                            "gaps_reported": len(reported & expected),
                            "false_gaps": len(reported - expected),
                            "first_check_fired": len(first.fired),
                            "first_check_s": first_s,
                            "first_check_round_trips": first_trips,
                            "check_s": check_s,
                            "round_trips": totals,
                            "calls": steady,
                            "per_job_us": check_s["median"] / size * 1e6,
                            "seed_s": seed_s,
                        }
                    )
        except Exception as exc:  # one store's failure must not hide the others' figures
            results[name] = {"error": f"{type(exc).__name__}: {exc}", "rows": rows}
            continue
        results[name] = rows
    return results
