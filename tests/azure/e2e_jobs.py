"""Jobs served by the Azure function-app tests, in-process. Handlers record calls in module
state the tests read; ``POISON`` steers the poison job."""

from __future__ import annotations

import threading
import time

import cronwarden
from cronwarden import RunContext

CALLS: list[tuple[str, str, int, float]] = []  # (job, run_key, attempt, time.time())
LOCK = threading.Lock()
POISON = {"on": True}


def _record(ctx: RunContext) -> None:
    with LOCK:
        CALLS.append((ctx.job.name, ctx.run_key, ctx.attempt, time.time()))


def calls(job: str) -> list[tuple[str, str, int, float]]:
    with LOCK:
        return [c for c in CALLS if c[0] == job]


@cronwarden.job("hourly", cron="0 * * * *", max_runtime="20s")
def hourly(ctx: RunContext) -> None:
    _record(ctx)


@cronwarden.job(
    "poison",
    cron="0 * * * *",
    max_runtime="20s",
    retry=cronwarden.Retry(max_attempts=3, min_backoff="1s", max_backoff="1s"),
)
def poison(ctx: RunContext) -> None:
    _record(ctx)
    if POISON["on"]:
        raise RuntimeError("poisoned input: cannot parse the export")


@cronwarden.job("berlin", cron="0 2 * * *", timezone="Europe/Berlin", max_runtime="20s")
def berlin(ctx: RunContext) -> None:
    _record(ctx)


@cronwarden.job("kolkata", cron="30 * * * *", timezone="Asia/Kolkata", max_runtime="20s")
def kolkata(ctx: RunContext) -> None:
    _record(ctx)


@cronwarden.job("long", cron="0 * * * *", max_runtime="20s")
def long(ctx: RunContext) -> None:
    _record(ctx)
    ctx.sleep(3.5)  # longer than the test queue's 2 s lock: the lock must be renewed
