"""Rows the listing commands print (as table cells or JSON lines): one function per listing,
each returning plain JSON-ready dicts, so a table and ``--output json`` never disagree."""

from __future__ import annotations

from typing import Any

from ..model.ports import RUN, Store
from ..model.records import OVERRAN, RunRecord, parse_iso, run_key_of
from ..model.redaction import redact


def _time(value: Any) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds").replace("+00:00", "Z")


def status_row(item: Any) -> dict[str, Any]:
    """One job of ``status``: the last success is the window that succeeded, not a finish time;
    a dead-lettered or overran last run is an alert, not "ok"."""
    st = item.status
    shown = st.get("status") or st.get("moved") or st.get("moving_in")  # a moved job: where
    # no run yet: the state text's "-" (no last run) reads "never run"; the pause or snooze
    # in force and the upstreams waited on that follow it still show
    state = item.state_text if shown else "never run" + item.state_text.removeprefix("-")
    waiting = str(getattr(item, "waiting_on", None) or "")
    if shown and not st.get("status") and waiting:
        state = f"never run; {waiting}"  # a dependent job's upstream has not succeeded
    alerts = [c.value for c in item.conditions]
    if state == "dead_lettered" and "dead_lettered" not in alerts:
        alerts.append("dead_lettered")
    overran = bool(st.get(OVERRAN))
    if overran:
        alerts.append("overran")
    return {
        "job": item.job.name,
        "owner": item.job.owner,
        "tags": list(item.job.tags),
        "schedule": (
            f"after {', '.join(item.job.after)}"
            if item.job.after
            else "events (one run per key)"
            if getattr(item.job, "event_keyed", False)
            else f"{item.job.schedule.cron} ({item.job.schedule.timezone})"
        ),
        "last_success_window": _time(item.last_success_window),
        "last_success_at": _time(item.last_success),
        "next_expected": _time(item.expected_next),
        "state": state,
        "overran": overran,
        "failures": int(st.get("consecutive_failures") or 0),
        "duration": item.duration_text,
        "missed_after": item.threshold,  # the `missed` threshold (docs/protocol.md)
        "alerts": alerts,
        "health": "ok" if not alerts else "not ok",
    }


def history_rows(store: Store, job: Any, limit: int) -> list[dict[str, Any]]:
    """The latest ``limit`` runs of ``job``, newest first, everything the record holds."""
    rows = []
    for record in store.query(RUN, job.name)[-limit:][::-1]:
        run = RunRecord.from_data(record.data)
        rows.append(
            {
                "window": record.key.id,
                "state": run.state.value,
                "attempt": run.attempt,
                "generation": run.redrive,
                "started_at": _time(run.started_at),
                "finished_at": _time(run.finished_at),
                "duration_ms": run.duration_ms,
                "overran": run.overran,
                "reason": run.reason,
                "counters": dict(run.counters),
                "worker": run.owner,
                "run_id": run.run_id,
                "error": redact(run.error or _why_excused(run)),
                "excused": run.excused,
            }
        )
    return rows


def _why_excused(run: RunRecord) -> str:
    """For an excused window, why it did not run (overlap skip, pause, resolved by hand)."""
    if not run.excused:
        return ""
    return f"excused ({run.excused}): {run.excused_detail}" if run.excused_detail else run.excused


def letter_row(letter: Any) -> dict[str, Any]:
    return {
        "message_id": letter.message_id,
        "run_key": letter.attributes.get("run_key", "?"),
        "job": letter.attributes.get("job"),
        "dead_lettered_at": _time(letter.dead_lettered_at),
        "reason": letter.reason,
        "attempts": letter.attempts,
        "description": redact(letter.description),
    }


def letter_detail(letter: Any, store: Store) -> dict[str, Any]:
    """A dead letter in full, with its run's last error and times from the run record."""
    detail = {
        **letter_row(letter),
        "attributes": letter.attributes,
        "body": redact(letter.body.decode("utf-8", "replace")),
    }
    job, window = letter.attributes.get("job"), letter.attributes.get("window")
    record = store.get(run_key_of(job, window)) if job and window else None
    if record is not None:
        run = RunRecord.from_data(record.data)
        detail["run"] = {
            "state": run.state.value,
            "attempt": run.attempt,
            "started_at": _time(run.started_at),
            "finished_at": _time(run.finished_at),
            "worker": run.owner,
            "error": redact(run.error or ""),
            "traceback": run.traceback,
        }
        if detail["dead_lettered_at"] is None:
            detail["dead_lettered_at"] = _time(parse_iso(record.data.get("finished_at")))
    return detail
