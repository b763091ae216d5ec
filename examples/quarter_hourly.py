"""Quarter-hourly sync: a small UTC job every 15 minutes (the second example for deployments).

Run it:  cronwarden run --jobs examples/quarter_hourly.py --once
"""

from __future__ import annotations

import cronwarden


@cronwarden.job(
    "quarter-hourly-sync",
    cron="*/15 * * * *",
    timezone="UTC",
    max_runtime="2m",
    overlap="skip",
    retry=cronwarden.Retry(max_attempts=8, min_backoff="5s", max_backoff="2m"),
    liveness=cronwarden.Liveness(grace="20m", failure_threshold=3),
)
def quarter_hourly_sync(ctx: cronwarden.RunContext) -> None:
    """Pull the latest changes and record how many there were."""
    ctx.count("changes", 0)
    ctx.log.info("synced window %s", ctx.window.isoformat())
