"""Jobs served by the functions-framework tests (tests/gcp/test_functions.py), in-process.

The handlers record calls in module state the tests read; ``POISON`` steers the poison job.
"""

from __future__ import annotations

import threading
import time

import cronwarden
from cronwarden import RunContext

CALLS: list[tuple[str, str, float]] = []  # (job, run_key, time.time() at handler start)
LOCK = threading.Lock()
POISON = {"on": True}


def _record(ctx: RunContext) -> None:
    with LOCK:
        CALLS.append((ctx.job.name, ctx.run_key, time.time()))


def calls(job: str) -> list[tuple[str, str, float]]:
    with LOCK:
        return [c for c in CALLS if c[0] == job]


@cronwarden.job("every-minute", cron="* * * * *", max_runtime="20s")
def every_minute(ctx: RunContext) -> None:
    _record(ctx)


@cronwarden.job("hourly", cron="0 * * * *", max_runtime="20s")
def hourly(ctx: RunContext) -> None:
    _record(ctx)
    time.sleep(0.3)  # long enough for the second tick's request to meet the running one


@cronwarden.job(
    "poison",
    cron="0 * * * *",
    max_runtime="20s",
    retry=cronwarden.Retry(max_attempts=3, min_backoff=0, max_backoff=0),
)
def poison(ctx: RunContext) -> None:
    _record(ctx)
    if POISON["on"]:
        raise RuntimeError("poisoned input: cannot parse the export")


def _latency_job(name: str) -> cronwarden.Job:
    return cronwarden.job(name, cron="* * * * *", max_runtime="20s")(_record)


# Distinct jobs so that each tick is a new run key (latency samples).
lat_0, lat_1, lat_2, lat_3, lat_4, lat_5, lat_6, lat_7, lat_8, lat_9 = (
    _latency_job(f"lat-{i}") for i in range(10)
)
