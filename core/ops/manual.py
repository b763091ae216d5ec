"""``cronwarden trigger``: say what a manual trigger did, honestly.

"already succeeded at … (use --rerun)", "already dead-lettered …", "already running …",
"already queued", or "enqueued"; ``--rerun`` enqueues a finished window again as a new
generation (``cw-redrive`` one above the run record's), which the claim takes as a fresh
attempt budget and records on the run record.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..model.ports import REDRIVE_ATTRIBUTE, Store
from ..model.records import RunRecord, run_key_of
from ..model.redaction import redact
from ..model.runs import RunRequest, RunState, format_window, request_attributes
from ..model.schedule import utc
from .verdicts import EXIT_FAILED, EXIT_OK, verdict_line


@dataclass(frozen=True)
class Told:
    run_key: str
    window: datetime
    line: str
    code: int = EXIT_OK
    wait: bool = True  #: whether working the queue can change the answer


def _when(value: datetime | None) -> str:
    return "?" if value is None else value.isoformat(timespec="seconds").replace("+00:00", "Z")


def run_record(store: Store, job: Any, window: datetime) -> RunRecord | None:
    record = store.get(run_key_of(job.name, format_window(window)))
    return None if record is None else RunRecord.from_data(record.data)


def enqueue_by_hand(runner: Any, job: Any, when: datetime, *, rerun: bool) -> Told:
    """Enqueue the window ``when`` falls in unless it finished, runs or waits already."""
    window = job.schedule.floor(utc(when))
    request = RunRequest(job.name, window, reason="rerun" if rerun else "manual")
    key = request.run_key
    run = run_record(runner.store, job, window)
    queue = runner.queue
    finished = run is not None and run.state in (RunState.SUCCEEDED, RunState.DEAD_LETTERED)
    if run is not None and finished and not rerun:
        if run.state is RunState.SUCCEEDED:
            return Told(
                key,
                window,
                f"{key}: already succeeded at {_when(run.finished_at)} "
                "(use --rerun to run it again)",
                EXIT_OK,
                wait=False,
            )
        return Told(
            key,
            window,
            f"{key}: already dead-lettered at {_when(run.finished_at)}: "
            f"{redact(run.error or '?')} (use --rerun, or `cronwarden dlq redrive`)",
            EXIT_FAILED,
            wait=False,
        )
    if run is not None and run.lease_live(runner.engine.now()) and not rerun:
        return Told(key, window, f"{key}: already running on {run.holder}", EXIT_OK)
    holds = getattr(queue, "holds", None)
    if callable(holds) and holds(key) and not rerun:
        return Told(key, window, f"{key}: already queued")
    attributes = request_attributes(request)
    dedup = f"{key}:manual-{time.time_ns()}"  # a manual trigger is never dropped as a repeat
    text = f"{key}: enqueued"
    if rerun and run is not None and finished:
        generation = run.redrive + 1
        attributes[REDRIVE_ATTRIBUTE] = str(generation)
        dedup = f"{key}:rerun-{generation}"
        text = f"{key}: enqueued again as re-run generation {generation} (was {run.state.value})"
    queue.publish(request.to_json(), attributes=attributes, dedup_id=dedup)
    return Told(key, window, text)


def judge_after(
    store: Store,
    job: Any,
    told: Told,
    outcomes: Mapping[str, str],
    now: datetime | None = None,
) -> tuple[int, str]:
    """The exit status and line for the triggered run after the queue was worked: the outcome
    seen, else the run record's state (a run whose lease ran out at ``now`` is ``abandoned``:
    its worker is gone and it waits for its message to come back)."""
    kind = outcomes.get(told.run_key)
    if kind is None:
        now = now or datetime.now(UTC)
        run = run_record(store, job, told.window)
        kind = (
            {
                RunState.SUCCEEDED: "succeeded",
                RunState.FAILED: "failed",
                RunState.DEAD_LETTERED: "dead_lettered",
                RunState.RUNNING: "in_progress" if run.lease_live(now) else "abandoned",
            }.get(run.state, "not run")
            if run is not None
            else "not run"
        )
    return verdict_line({told.run_key: kind})
