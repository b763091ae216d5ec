"""Jobs for the migration tests, every minute: a plain job, a job with a ledger that fails
half-way through one window (its retry is due long after the move: the destination takes it
over), a job that dead-letters one window, and a job the test pauses. Side effects go to the
effects database of ``tests.support.jobs`` ($CW_TEST_EFFECTS)."""

from __future__ import annotations

import os

import cronwarden
from cronwarden import PermanentError, RunContext
from tests.support.jobs import record_effect

ITEMS = 6
HALF_AT = 3  #: the item before which the first attempt of the half-done window fails


@cronwarden.job("tick", cron="* * * * *", max_runtime="30s")
def tick(ctx: RunContext) -> None:
    record_effect("tick", ctx.run_key, run_id=ctx.run_id)


@cronwarden.job(
    "ledger",
    cron="* * * * *",
    max_runtime="30s",
    retry=cronwarden.Retry(max_attempts=5, min_backoff="1h", max_backoff="1h"),
)
def ledger(ctx: RunContext) -> None:
    half = os.environ.get("CW_MIGRATE_HALF", "")
    for item in ctx.items([str(n) for n in range(ITEMS)], batch_size=1):
        if ctx.run_key == f"ledger:{half}" and ctx.attempt == 1 and item.key == str(HALF_AT):
            raise RuntimeError("half-way failure (the test's)")
        record_effect("item", f"{ctx.run_key}/{item.key}", item.idempotency_key, ctx.run_id)


@cronwarden.job(
    "poison",
    cron="* * * * *",
    max_runtime="30s",
    retry=cronwarden.Retry(max_attempts=5, min_backoff=0, max_backoff=0),
)
def poison(ctx: RunContext) -> None:
    if ctx.run_key == f"poison:{os.environ.get('CW_MIGRATE_POISON', '')}":
        raise PermanentError("poisoned window (the test's)")
    record_effect("poison", ctx.run_key, run_id=ctx.run_id)


@cronwarden.job("held", cron="* * * * *", max_runtime="30s")
def held(ctx: RunContext) -> None:
    record_effect("held", ctx.run_key, run_id=ctx.run_id)
