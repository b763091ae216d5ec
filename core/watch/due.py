"""When the watcher must look at a job again: the ``watch_due`` it writes after judging one.

A check reads only the status records that are due (:meth:`~cronwarden.model.ports.Store.
query_due`): ``due_at <= now`` (written by the run's own commits: a claimed run's max runtime
and lease, a failure, a skip, a suspicious or quarantined success at once) or ``watch_due <=
now`` (written here). The watcher's verdict on a job whose record nothing writes changes only
at instants its status and definition name; :func:`next_look` is the earliest of them, so the
job is read again exactly when a condition could start (or end) by time alone:

* the deadline of the next window (``expected_next + grace``): until then every due window is
  settled or in flight, as the check just found. A window is read once it is due, whether or
  not a run claimed it (a run's success cannot hide an earlier window that never ran: the
  watcher's own ``watch_due`` is the proof, and no run writes it back);
* the gap time of every window in flight (queued, running, failed with a retry due);
* a running run's max runtime (``stuck``), its lease's gap time, its ``slow`` threshold;
* at most :data:`MAX_QUIET` ahead (the accounting checkpoint moves forward, an unknown clock
  jump is caught).

A job with alert state to follow (active conditions, alerts on record, undelivered alerts, a
snooze, a pause in force) gets ``watch_due`` 0: every check reads it, as before.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..model.records import ALERTS, DELIVERIES, QUARANTINED, StatusRecord, due_ts
from ..run.accounting import MAX_WINDOWS_PER_CHECK

if TYPE_CHECKING:
    from .health import JobHealth

#: the longest a job goes unread (the accounting checkpoint moves forward at least this often)
MAX_QUIET = timedelta(hours=6)
ALWAYS = 0  #: ``watch_due`` of a job every check reads


def followed(status: dict[str, Any], now: datetime) -> bool:
    """Whether ``status`` carries alert state a check must follow (read every check)."""
    if status.get(ALERTS) or status.get(DELIVERIES) or status.get(QUARANTINED):
        return True
    if status.get("snoozed_alerts") or isinstance(status.get("snooze"), dict):
        return True
    if status.get("pause") is not None:
        from ..jobs.pause import active_pause

        return active_pause(status, now) is not None
    return False


def next_look(item: JobHealth, now: datetime) -> int:
    """The ``watch_due`` (epoch seconds) of a job just judged: :data:`ALWAYS` while it has
    conditions or alert state, else the earliest instant its verdict can change by time."""
    status = item.status
    if item.conditions or followed(status, now):
        return ALWAYS
    if len(item.accounting.states) >= MAX_WINDOWS_PER_CHECK:
        return ALWAYS  # a backlog read in pages: the next check reads the next page
    job = item.job
    nxt = item.expected_next
    candidates = [nxt + job.grace_at(nxt), now + MAX_QUIET]
    for state in item.accounting.states:
        if not state.state.settled and state.gap_at is not None:
            candidates.append(state.gap_at)
    record = StatusRecord.from_data(status)
    started = record.started_at
    if record.status == "running" and started is not None:
        candidates.append(started + job.max_runtime)
        expires = record.lease_expires
        if expires is not None:
            candidates.append(expires + job.grace_at(expires))
        if job.slow_factor is not None:
            from ..run.baseline import baseline_of

            base = baseline_of(job, status)
            if base is not None:
                candidates.append(started + timedelta(milliseconds=job.slow_factor * base.p50_ms))
    return due_ts(min(candidates))


__all__ = ["ALWAYS", "MAX_QUIET", "followed", "next_look"]
