"""Jobs for the Redis CLI test: one hourly job (its latest due window runs with ``--once``)."""

from __future__ import annotations

import cronwarden
from cronwarden import RunContext


@cronwarden.job("hourly", cron="0 * * * *", max_runtime="1m")
def hourly(ctx: RunContext) -> None:
    for _item in ctx.items(range(5), batch_size=2):
        pass
