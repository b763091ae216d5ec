"""The jobs of the cross-cloud watcher tests: they run on GCP or Azure (seeded there by the
tests), their watcher on AWS."""

from __future__ import annotations

import cronwarden
from cronwarden import RunContext


@cronwarden.job("cc-hourly", cron="0 * * * *", max_runtime="1m")
def cc_hourly(ctx: RunContext) -> None:
    """Does nothing: the tests only need its records."""
