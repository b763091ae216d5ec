"""Run a job's handler once, through the real engine, on an in-memory store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from cronwarden.jobs.definitions import Job, JobSet
from cronwarden.model.ports import Store
from cronwarden.model.runs import RunRequest
from cronwarden.run.engine import Engine, EngineSettings, Outcome

from .clock import FakeClock, _as_utc
from .store import MemoryStore


def run_once(
    job: Job,
    window: datetime | str,
    *,
    store: Store | None = None,
    clock: Callable[[], datetime] | None = None,
    payload: dict[str, Any] | None = None,
    reason: str = "schedule",
) -> Outcome:
    """Run ``job`` for ``window`` once, as a worker would for one delivery, and return the
    :class:`~cronwarden.Outcome` (``succeeded``, ``failed`` with a retry delay,
    ``dead_lettered``, ``skipped``, ...). Handler errors become the outcome; nothing is raised
    for them.

    ``job`` is what ``@cronwarden.job(...)`` returned. ``window`` is one of its windows, as an
    aware datetime or ISO text (``"2026-01-20T02:00Z"``); a time that is not a window raises
    :class:`~cronwarden.model.errors.MalformedRunRequest`. The run goes through the real claim,
    lease,
    ledger and completion on ``store`` (a fresh :class:`MemoryStore` by default; pass one to
    run again on the same state, e.g. to see a ``duplicate`` or a takeover). ``clock`` defaults
    to a :class:`FakeClock` standing at the window, so the run happens "on time".
    ``payload`` and ``reason`` are those of the run request (``reason`` ``"manual"``,
    ``"catch_up"``, ``"backfill"`` as a trigger would set them).
    """
    at = _as_utc(window)
    now = clock if clock is not None else FakeClock(at)
    engine = Engine(
        JobSet([job]), store if store is not None else MemoryStore(), EngineSettings(clock=now)
    )
    request = RunRequest(
        job.name, at, reason=reason, payload=dict(payload or {}), requested_at=now()
    )
    return engine.execute(request)
