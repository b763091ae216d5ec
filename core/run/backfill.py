"""Finding windows that never ran, for catch-up and manual backfill."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..jobs.definitions import Job
from ..model.ports import RUN, Store
from ..model.runs import format_window
from ..model.schedule import utc

MAX_WINDOWS_PER_SCAN = 100_000


def missing_windows(
    store: Store, job: Job, start: datetime, end: datetime, *, limit: int | None = None
) -> list[datetime]:
    """Windows in ``[start, end]`` that have no run record at all, oldest first.

    One store query. Windows with a run record in any state are not missing: failed runs are
    retried by the queue, dead-lettered ones are in the DLQ (redrive them), running ones run.
    """
    start, end = utc(start), utc(end)
    if end < start:
        raise ValueError("backfill range ends before it starts")
    windows = []
    for window in job.schedule.windows(start, end):
        windows.append(window)
        if len(windows) > MAX_WINDOWS_PER_SCAN:
            raise ValueError(
                f"{job.name}: more than {MAX_WINDOWS_PER_SCAN} windows in the range; narrow it"
            )
    if not windows:
        return []
    last = format_window(windows[-1])
    seen = {
        record.key.id
        for record in store.query(RUN, job.name, start=format_window(windows[0]), end=last + "\x7f")
    }
    missing = [w for w in windows if format_window(w) not in seen]
    return missing[:limit] if limit is not None else missing


def catch_up_windows(store: Store, job: Job, current: datetime) -> list[datetime]:
    """Missed windows before ``current`` that the job's catch-up policy wants enqueued."""
    policy = job.catch_up
    if policy.within is None:
        return []
    earliest = utc(current) - policy.within
    before = utc(current) - timedelta(seconds=1)
    if before < earliest:
        return []
    return missing_windows(store, job, earliest, before, limit=policy.max_per_tick)
