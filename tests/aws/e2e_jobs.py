"""Jobs served by the AWS Lambda handler tests, in-process. Handlers record calls in module state
the tests read; ``POISON`` steers the poison job, ``CRASH`` the crash job."""

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


@cronwarden.job("berlin", cron="30 2 * * *", timezone="Europe/Berlin", max_runtime="20s")
def berlin(ctx: RunContext) -> None:
    _record(ctx)
