"""Jobs for the multi-host test: every minute, a plain job and a fan-out job with a ledger.
Side effects go to the effects database of ``tests.support.jobs`` ($CW_TEST_EFFECTS)."""

from __future__ import annotations

import time

import cronwarden
from cronwarden import RunContext
from tests.support.jobs import record_effect

ITEMS = 20


@cronwarden.job("tick", cron="* * * * *", max_runtime="30s")
def tick(ctx: RunContext) -> None:
    record_effect("tick", ctx.run_key, run_id=ctx.run_id)
    ctx.sleep(1.0)  # long enough for the other hosts' schedulers to fire the same window


@cronwarden.job("fan", cron="* * * * *", max_runtime="40s")
def fan(ctx: RunContext) -> None:
    for item in ctx.items(range(ITEMS), batch_size=5):
        record_effect("item", f"{ctx.run_key}/{item.key}", item.idempotency_key, ctx.run_id)
        time.sleep(0.02)
