"""The watcher's conditions about runs that *succeeded* but look wrong: ``suspicious`` (the
newest success broke its job's expectations) and ``slow`` (a run took, or is taking, more than
the job's ``slow_factor`` times its p50 baseline). Kept apart from the gap logic of
:mod:`cronwarden.watch.watcher`, which calls :func:`run_conditions` once per job."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..jobs.definitions import Job
from ..model.records import StatusRecord
from ..model.redaction import redact
from ..run.baseline import baseline_of
from .health import Alert, Condition, _ms
from .health import duration_text as duration_text


def run_conditions(
    job: Job, status: dict[str, Any], now: datetime, common: dict[str, Any]
) -> dict[Condition, Alert]:
    """``suspicious`` and ``slow`` for one job, from its status record alone."""
    record = StatusRecord.from_data(status)
    found: dict[Condition, Alert] = {}
    reasons = record.suspicious
    if reasons:
        why = redact("; ".join(reasons))
        found[Condition.SUSPICIOUS] = Alert(
            job.name,
            Condition.SUSPICIOUS,
            True,
            f"{job.name} succeeded but looks wrong: {why} (run "
            f"{record.suspicious_run_key or '?'}, window {status.get('suspicious_window', '?')}). "
            "First check: the source it reads: an empty export, a changed filter, expired "
            "credentials that return nothing.",
            first_check="the source the job reads",
            extra={"suspicious": reasons},
            **common,
        )
    factor = job.slow_factor
    if factor is None:
        return found
    last_window = status.get("last_success_window_ts")
    if record.status == "succeeded" and record.duration_ms is not None:
        base = baseline_of(
            job, status, exclude_window=last_window if isinstance(last_window, int) else None
        )
        if base is not None and record.duration_ms > factor * base.p50_ms:
            found[Condition.SLOW] = _slow(
                job, f"its last run took {_ms(record.duration_ms)}", factor, base.describe(), common
            )
    elif record.status == "running" and record.started_at is not None:
        base = baseline_of(job, status)
        running = (now - record.started_at).total_seconds() * 1000
        if base is not None and running > factor * base.p50_ms:
            found[Condition.SLOW] = _slow(
                job,
                f"run {status.get('run_id')} has been running for {_ms(running)}",
                factor,
                base.describe(),
                common,
            )
    return found


def _slow(job: Job, what: str, factor: float, baseline: str, common: dict[str, Any]) -> Alert:
    return Alert(
        job.name,
        Condition.SLOW,
        True,
        f"{job.name} slow: {what}, over {factor:g}x its usual duration ({baseline}). "
        "First check: the size of its input, the services it calls, and recent deploys.",
        first_check="input size and upstream latency",
        extra={"slow_factor": factor},
        **common,
    )


def quiet_while_paused(
    conditions: dict[Condition, Alert], status: dict[str, Any], due: datetime, now: datetime
) -> None:
    """Drop ``missed`` for a window that fell due while the job was paused, and ``skipping``
    while it is paused; every other condition still fires."""
    from ..jobs.pause import active_pause, excused

    if Condition.MISSED in conditions and excused(status, due, now):
        del conditions[Condition.MISSED]
    if Condition.SKIPPING in conditions and active_pause(status, now) is not None:
        del conditions[Condition.SKIPPING]


def snooze_filter(
    status: dict[str, Any],
    new: list[Alert],
    gone: list[Alert],
    current: dict[Condition, Alert],
    now: datetime,
) -> tuple[list[Alert], list[Alert], dict[str, Any]]:
    """What to notify for one job given its snooze, and the status fields to write.

    While snoozed, fired conditions are kept in ``snoozed_alerts`` instead of notified, and
    recoveries are not announced. The first check after the snooze ends announces, once, the
    snoozed conditions that still fire ("still firing after snooze") and clears the list."""
    if not status.get("snoozed_alerts") and not isinstance(status.get("snooze"), dict):
        return new, gone, {}  # never snoozed, nothing held: the common case, without imports
    import dataclasses

    from ..jobs.pause import snooze_of

    snooze = snooze_of(status)
    held = [str(c) for c in status.get("snoozed_alerts") or []]
    if snooze is not None and snooze.active(now):
        if not new and not gone:
            return [], [], {}
        kept = sorted(set(held) | {a.kind.value for a in new})
        return [], [], {"snoozed_alerts": kept} if kept != held else {}
    if not held and snooze is None:
        return new, gone, {}
    still = [
        dataclasses.replace(alert, text="still firing after snooze: " + alert.text)
        for kind, alert in current.items()
        if kind.value in held and alert not in new
    ]
    return [*new, *still], gone, {"snoozed_alerts": [], "snooze": None}
