"""One job for the S3 provider's doctor and status tests."""

from __future__ import annotations

import cronwarden
from cronwarden import RunContext


@cronwarden.job("s3-nightly", cron="0 2 * * *", max_runtime="1m")
def nightly(ctx: RunContext) -> None:
    for _ in ctx.items(["a", "b", "c"]):
        pass
