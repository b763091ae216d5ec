"""Job definitions and windows the measurements share."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwarden import Job, job


def make_job(name: str, handler: Callable[[Any], Any], *, max_runtime: str = "5m") -> Job:
    return job(name, cron="* * * * *", max_runtime=max_runtime)(handler)


def windows(count: int, *, start: datetime | None = None) -> list[datetime]:
    """``count`` distinct past minute windows, newest first (distinct run keys)."""
    base = (start or datetime.now(UTC)).replace(second=0, microsecond=0) - timedelta(hours=1)
    return [base - timedelta(minutes=i) for i in range(count)]
