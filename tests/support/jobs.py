"""Jobs used by the process-level tests. Behaviour is steered by environment variables so that
worker subprocesses can be started with plain ``python -m tests.support.worker``."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import cronwarden
from cronwarden import RunContext

EFFECTS = os.environ.get("CW_TEST_EFFECTS", "")


def record_effect(
    kind: str, item: str, idem: str = "", run_id: str = "", uncertain: bool = False
) -> None:
    """Append one side effect to the effects database (the test's view of the world)."""
    with sqlite3.connect(EFFECTS, timeout=30, isolation_level=None) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS effects (kind TEXT, item TEXT, idem TEXT, run_id TEXT, "
            "pid INTEGER, at REAL, uncertain INTEGER)"
        )
        db.execute(
            "INSERT INTO effects VALUES (?, ?, ?, ?, ?, ?, ?)",
            (kind, item, idem, run_id, os.getpid(), time.time(), int(uncertain)),
        )


def _wait_for_file(path: str, deadline: float, ctx: RunContext) -> None:
    end = time.monotonic() + deadline
    while not Path(path).exists():
        if time.monotonic() > end:
            raise TimeoutError(f"{path} did not appear")
        ctx.sleep(0.02)


@cronwarden.job("race", cron="* * * * *", max_runtime="30s")
def race(ctx: RunContext) -> None:
    record_effect("race", ctx.run_key, run_id=ctx.run_id)
    ctx.sleep(float(os.environ.get("CW_TEST_RACE_HOLD", "0.3")))


@cronwarden.job("slow", cron="* * * * *", max_runtime="60s", overlap="skip")
def slow(ctx: RunContext) -> None:
    record_effect("slow-start", ctx.run_key, run_id=ctx.run_id)
    _wait_for_file(os.environ["CW_TEST_RELEASE"], 60, ctx)
    record_effect("slow-end", ctx.run_key, run_id=ctx.run_id)


@cronwarden.job(
    "fanout",
    cron="* * * * *",
    max_runtime=os.environ.get("CW_TEST_RUNTIME", "3s"),
    retry=cronwarden.Retry(max_attempts=5, min_backoff=0, max_backoff=0),
)
def fanout(ctx: RunContext) -> None:
    if not (ctx.checkpoint or {}).get("prepared"):
        record_effect("prepare", ctx.run_key, run_id=ctx.run_id)
        ctx.save_checkpoint({"prepared": True})
    delay = float(os.environ.get("CW_TEST_ITEM_DELAY", "0.05"))
    count = int(os.environ.get("CW_TEST_ITEMS", "30"))
    for item in ctx.items(range(count), batch_size=int(os.environ.get("CW_TEST_BATCH", "5"))):
        record_effect("item", item.key, item.idempotency_key, ctx.run_id, item.uncertain)
        time.sleep(delay)  # the "work": deliberately not cooperative, like most real code
