"""Provisional window accounting for the timeline: ``window_states`` with the name and shape
that ``cronwarden.run.accounting.window_states`` will have ([windows], issue 12). The page calls it
through :func:`cronwarden.dashboard.views.window_states_of` only, so swapping in the real one is
one line there.

Derived from the job's schedule and the run records of the range (one store query, plus one
read of the status record for ``first_seen_at``): every due window of ``[start, end]`` gets one
state; a window without a run record is a ``gap`` once its grace has passed (``queued`` before
that), and is left out when it lies before the job was first seen (nothing was owed then).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..jobs.definitions import Job
from ..model.ports import RUN, Store
from ..model.records import parse_iso, status_key_of
from ..model.runs import format_window

#: states in the order the legend shows them
STATES = (
    "succeeded",
    "suspicious",
    "running",
    "failed",
    "dead_lettered",
    "excused",
    "queued",
    "gap",
)
MAX_WINDOWS = 2000  #: a range with more windows is cut to its newest ones


@dataclass(frozen=True)
class WindowState:
    """One due window and what became of it."""

    window: datetime
    state: str  #: one of :data:`STATES`
    run_key: str
    attempt: int = 0
    run_id: str | None = None
    duration_ms: int | None = None
    detail: str = ""  #: why: the error type, the excuse, "lease expired"


def window_states(
    store: Store, job: Job, start: datetime, end: datetime, now: datetime
) -> list[WindowState]:
    """The state of every window of ``job`` with ``start <= window <= min(end, now)``."""
    last = min(end, now)
    windows = list(job.schedule.windows(start, last))[-MAX_WINDOWS:]
    if not windows:
        return []
    records = store.query(
        RUN,
        job.name,
        start=format_window(windows[0]),
        end=format_window(windows[-1]) + "\uffff",
    )
    runs = {record.key.id: record.data for record in records}
    status = store.get(status_key_of(job.name))
    first_seen = parse_iso(status.data.get("first_seen_at")) if status is not None else None
    grace_over = now - job.grace_at(now)
    return [
        _state_of(job, window, runs.get(format_window(window)), grace_over, now)
        for window in windows
        if first_seen is None or window >= first_seen or format_window(window) in runs
    ]


def _state_of(
    job: Job, window: datetime, data: dict[str, Any] | None, grace_over: datetime, now: datetime
) -> WindowState:
    text = format_window(window)
    run_key = f"{job.name}:{text}"
    if data is None:
        state = "gap" if window <= grace_over else "queued"
        return WindowState(window, state, run_key)
    raw = str(data.get("state") or "running")
    detail = ""
    if raw == "running":
        expires = parse_iso(data.get("lease_expires"))
        if expires is not None and expires <= now:
            detail = "lease expired: the next delivery takes it over"
    elif raw == "excused":
        detail = str(data.get("excused") or "")
    elif raw in ("failed", "dead_lettered"):
        detail = str(data.get("error_type") or "")
    state = raw if raw in STATES else "running"
    if raw == "succeeded" and data.get("suspicious"):
        state, detail = "suspicious", str(data.get("suspicious"))
    duration = data.get("duration_ms")
    return WindowState(
        window,
        state,
        run_key,
        attempt=int(data.get("attempt") or 0),
        run_id=str(data["run_id"]) if data.get("run_id") else None,
        duration_ms=int(duration) if isinstance(duration, int | float) else None,
        detail=detail,
    )
