"""A store seeded with jobs in every state, written with the records' own codecs, and a
dead-letter queue holding one letter (the dead-lettered job's run request)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cronwarden import JobSet, job
from cronwarden.model import RunRequest, RunState, format_window
from cronwarden.model.ports import Create, Key, Merge, Queue, Store
from cronwarden.model.records import (
    ItemRecord,
    LockRecord,
    RunRecord,
    iso,
    item_key_of,
    lock_key_of,
    run_key_of,
    status_key_of,
)

NOW = datetime(2026, 1, 20, 12, 30, tzinfo=UTC)
SECRET = "hunter2-s3cret-value"  #: appears in an error text; no page may show it
HOURS = 24


def _noop(ctx: Any) -> None:
    return None


def jobs() -> JobSet:
    def j(name: str, **kw: Any) -> Any:
        return job(name, cron="0 * * * *", max_runtime="10m", **kw)(_noop)

    return JobSet(
        [
            j("healthy", owner="team-data", tags=["billing", "eu"], timezone="Europe/Berlin"),
            j("failing", owner="team-data", tags=["billing"]),
            j("dead", owner="team-ops", tags=["eu"]),
            j("running", owner="team-ops"),
            j("paused", owner="team-ops"),
            j("suspicious", owner="team-data"),
            j("never"),
        ]
    )


def _run(name: str, window: datetime, state: RunState, **kw: Any) -> RunRecord:
    text = format_window(window)
    started = window + timedelta(minutes=1)
    finished = None if state is RunState.RUNNING else started + timedelta(seconds=42)
    defaults: dict[str, Any] = {
        "state": state,
        "owner": "worker-1",
        "run_id": f"{window:%Y%m%dT%H%M}00000-abc123",
        "fence": 1,
        "attempt": 1,
        "started_at": started,
        "first_started_at": started,
        "finished_at": finished,
        "duration_ms": None if finished is None else 42_000 + window.hour * 500,
        "counters": {"rows": 10 * window.hour},
    }
    defaults.update(kw)
    return RunRecord(job=name, window=text, run_key=f"{name}:{text}", **defaults)


def _status(name: str, run: RunRecord, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "job_name": name,
        "run_id": run.run_id,
        "run_key": run.run_key,
        "window": run.window,
        "status": run.state.value,
        "started_at": iso(run.started_at or NOW),
        "finished_at": iso(run.finished_at) if run.finished_at else None,
        "duration_ms": run.duration_ms,
        "first_seen_at": iso(
            NOW.replace(minute=0) - timedelta(hours=HOURS)
        ),  # the first seeded window
        "owner": run.owner,
    }
    data.update(extra)
    return data


def seed(store: Store, queue: Queue) -> None:
    """Write every job's runs and status as of :data:`NOW`; one dead letter in ``queue``."""
    hours = [NOW.replace(minute=0) - timedelta(hours=h) for h in range(HOURS, -1, -1)]
    ops: list[Any] = []

    def put(run: RunRecord) -> None:
        ops.append(Create(run_key_of(run.job, run.window), run.to_data()))

    def success_status(name: str, window: datetime) -> dict[str, Any]:
        return {
            "last_success_at": iso(window + timedelta(minutes=2)),
            "last_success_window_ts": int(window.timestamp()),
            "consecutive_failures": 0,
        }

    # healthy: every hour succeeded except one gap and one excused skip
    for h in hours:
        if h == hours[5]:
            continue  # a gap
        if h == hours[9]:
            # state "excused" ([windows]) is newer than RunState here: written as raw data
            data = {
                **_run("healthy", h, RunState.SUCCEEDED).to_data(),
                "state": "excused",
                "excused": "overlap_skip",
            }
            ops.append(Create(run_key_of("healthy", format_window(h)), data))
            continue
        put(_run("healthy", h, RunState.SUCCEEDED))
    last = _run("healthy", hours[-1], RunState.SUCCEEDED)
    ops.append(
        Merge(
            status_key_of("healthy"),
            {**_status("healthy", last), **success_status("healthy", hours[-1])},
        )
    )
    # failing: succeeded until 4 hours ago, then failures, the newest retrying
    for h in hours[:-4]:
        put(_run("failing", h, RunState.SUCCEEDED))
    failed = None
    for h in hours[-4:]:
        failed = _run(
            "failing",
            h,
            RunState.FAILED,
            attempt=3,
            error=f"ConnectionError: login failed password={SECRET} at db.example:5432",
            extra={"error_type": "ConnectionError"},
        )
        put(failed)
    assert failed is not None
    ops.append(
        Merge(
            status_key_of("failing"),
            {
                **_status("failing", failed),
                **success_status("failing", hours[-5]),
                "consecutive_failures": 4,
                "error_snippet": failed.error,
            },
        )
    )
    # dead: the newest window dead-lettered after 5 attempts
    for h in hours[:-1]:
        put(_run("dead", h, RunState.SUCCEEDED))
    dead = _run("dead", hours[-1], RunState.DEAD_LETTERED, attempt=5, error="ValueError: bad row")
    put(dead)
    ops.append(
        Merge(status_key_of("dead"), {**_status("dead", dead), **success_status("dead", hours[-2])})
    )
    # running: holds the lock right now, with a ledger in progress
    for h in hours[:-1]:
        put(_run("running", h, RunState.SUCCEEDED))
    running = _run("running", hours[-1], RunState.RUNNING, lease_expires=NOW + timedelta(minutes=5))
    put(running)
    ops.append(
        Merge(
            status_key_of("running"),
            {
                **_status("running", running),
                **success_status("running", hours[-2]),
                "started_at": iso(NOW - timedelta(minutes=2)),
                "last_skip_reason": "lock_held",
                "last_skip_owner": running.holder,
                "last_skip_at": iso(NOW),
            },
        )
    )
    ops.append(
        Create(
            lock_key_of("running"),
            LockRecord(
                running.owner,
                running.run_id,
                running.run_key,
                running.window,
                "schedule",
                running.lease_expires,
            ).to_data(),
        )
    )
    for i, state in enumerate(("done", "done", "pending", "quarantined")):
        ops.append(
            Create(
                item_key_of("running", running.window, f"item-{i}"),
                ItemRecord(f"item-{i}", "fp", state, running.run_id).to_data(),
            )
        )
    # paused: succeeded, then paused by an operator
    for h in hours:
        put(_run("paused", h, RunState.SUCCEEDED))
    ops.append(
        Merge(
            status_key_of("paused"),
            {
                **_status("paused", _run("paused", hours[-1], RunState.SUCCEEDED)),
                **success_status("paused", hours[-1]),
                "paused": True,
            },
        )
    )
    # suspicious: the newest success broke its expectations
    for h in hours:
        extra = {"suspicious": ["rows < 100"]} if h == hours[-1] else {}
        put(_run("suspicious", h, RunState.SUCCEEDED, extra=extra))
    ops.append(
        Merge(
            status_key_of("suspicious"),
            {
                **_status("suspicious", _run("suspicious", hours[-1], RunState.SUCCEEDED)),
                **success_status("suspicious", hours[-1]),
                "suspicious": ["rows < 100"],
            },
        )
    )
    for op in ops:  # one job per commit; one record each keeps it simple
        store.commit([op])
    # the dead letter: the dead job's run request, its last error in the description
    request = RunRequest("dead", hours[-1], reason="schedule", requested_at=NOW)
    queue.publish(request.to_json(), attributes={"run_key": request.run_key, "job": "dead"})
    deliveries = queue.receive(1, wait=1.0)
    assert deliveries, "the seeded run request was not delivered"
    queue.dead_letter(deliveries[0], "max_attempts", f"ValueError: bad row (token={SECRET})")


def key_count(store: Store) -> int:
    return len(store.query("run"))


__all__ = ["NOW", "SECRET", "Key", "jobs", "seed"]
