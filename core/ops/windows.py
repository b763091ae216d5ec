"""Actions on one window, shared by the command line and the dashboard: the store's
dead-lettered record is the truth.

:func:`dead_lettered_windows` lists the dead-lettered windows the store holds, saying for each
whether its message is in the broker's dead-letter queue ("not in the broker": the worker died
between the dead-letter commit and the broker call, or the message expired), and the
dead-lettered runs of event consumers (by event key).
:func:`redrive_window` runs such a window again, whether or not the broker still holds its
message; :func:`resolve_window` accounts for a window without running it (recorded: who, when,
why); a redriven delivery of a resolved window is acknowledged without running
(:mod:`cronwarden.run.claiming`), and :func:`drop_resolved_letters` removes the broker's dead
letters of a resolved window. A refused action raises :class:`WindowActionRefused` with the
reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..jobs.definitions import Job, JobSet
from ..model.errors import CommitConflict
from ..model.ports import (
    REDRIVE_ATTRIBUTE,
    RUN,
    Create,
    DeadLetters,
    Merge,
    Publisher,
    Store,
    Update,
)
from ..model.records import (
    WINDOWS_OPEN,
    WINDOWS_RECORDED,
    RunRecord,
    iso,
    run_key_of,
    status_excused,
    status_key_of,
)
from ..model.runs import RunRequest, RunState, format_window
from ..run.claiming import RESOLVED

REDRIVE_REASON = "redrive"  #: the run request reason of a redrive by window


class WindowActionRefused(Exception):
    """The window can not be redriven / resolved as asked (the message says why)."""


#: how many of the broker's dead letters are peeked to say which windows it holds
PEEK_LIMIT = 1000


@dataclass(frozen=True)
class StoreDeadLetter:
    job: str
    #: the window's text; for an event consumer (``event_key``), the event key
    window: str
    reason: str
    attempts: int
    in_broker: bool
    finished_at: datetime | None
    event_key: bool = False  #: a run of an event consumer (``window`` is its event key)


def dead_lettered_windows(
    jobs: JobSet,
    store: Store,
    dlq: DeadLetters | None,
    now: datetime,
    *,
    horizon: timedelta | None = None,
) -> list[StoreDeadLetter]:
    """Every dead-lettered run in the store: the jobs' windows (within ``horizon`` of ``now``
    when given; by default every run record the store still holds, i.e. its retention), oldest
    first per job, then the event consumers' runs (every record held, by event key), in one
    query per job and consumer. ``in_broker`` says whether the broker's DLQ holds its message
    (peeked, up to :data:`PEEK_LIMIT`)."""
    in_broker: set[str] = set()
    if dlq is not None:
        in_broker = {letter.attributes.get("run_key", "") for letter in dlq.dlq_peek(PEEK_LIMIT)}
    start = None if horizon is None else format_window(jobs_floor(now - horizon))
    found: list[StoreDeadLetter] = []
    sources = [(job.name, start, False) for job in jobs]
    sources += [(name, None, True) for name in sorted(jobs.consumers)]
    for name, since, keyed in sources:
        for record in store.query(RUN, name, start=since):
            run = RunRecord.from_data(record.data)
            if run.state is RunState.DEAD_LETTERED:
                found.append(
                    StoreDeadLetter(
                        name,
                        record.key.id,
                        run.error or "",
                        run.attempt - run.budget_start,
                        run.run_key in in_broker,
                        run.finished_at,
                        keyed,
                    )
                )
    return found


def jobs_floor(when: datetime) -> datetime:
    return when.replace(second=0, microsecond=0)


def _run_of(store: Store, job: Job, window: datetime) -> tuple[Any, RunRecord | None]:
    record = store.get(run_key_of(job.name, format_window(window)))
    return record, (None if record is None else RunRecord.from_data(record.data))


def redrive_window(store: Store, queue: Publisher, job: Job, window: datetime) -> RunRequest:
    """Enqueue a dead-lettered window again with the next redrive generation (a fresh attempt
    budget), whether or not the broker still holds its dead letter."""
    _, run = _run_of(store, job, window)
    if run is None or run.state is not RunState.DEAD_LETTERED:
        state = "no run record" if run is None else run.state.value
        raise WindowActionRefused(
            f"{job.name} {format_window(window)} is not dead-lettered ({state}); "
            "`cronwarden backfill` runs a window that never ran"
        )
    generation = run.redrive + 1
    request = RunRequest(job.name, window, reason=REDRIVE_REASON, payload=run.payload)
    queue.publish(
        request.to_json(),
        attributes={
            "job": job.name,
            "window": format_window(window),
            "run_key": request.run_key,
            "reason": REDRIVE_REASON,
            REDRIVE_ATTRIBUTE: str(generation),
        },
        dedup_id=f"{request.run_key}#redrive-{generation}",
    )
    return request


def resolve_window(
    store: Store, job: Job, window: datetime, reason: str, *, actor: str, now: datetime
) -> RunRecord:
    """Account for a dead-lettered, failed or never-run window without running it: its run
    record becomes ``excused`` (``resolved``) with who, when and why, in one compare-and-set
    commit with the job's accounting. Refused for a window that succeeded or is running."""
    reason = reason.strip()
    if not reason:
        raise WindowActionRefused("--reason is required: say why this window needs no run")
    key = run_key_of(job.name, format_window(window))
    detail = f"{reason} (by {actor} at {iso(now)})"
    atomic = store.capabilities.atomic_increment
    for _ in range(3):
        record, run = _run_of(store, job, window)
        if run is None:
            run = RunRecord(job.name, format_window(window), f"{job.name}:{format_window(window)}")
            excused = run.with_(
                state=RunState.EXCUSED, finished_at=now, excused=RESOLVED, excused_detail=detail
            )
            ops: list[Any] = [Create(key, excused.to_data())]
            increments = {WINDOWS_RECORDED: 1} if atomic else {}
        else:
            if run.state.settled:
                raise WindowActionRefused(
                    f"{job.name} {format_window(window)} is {run.state.value}: nothing to resolve"
                )
            if run.lease_live(now):
                raise WindowActionRefused(
                    f"{job.name} {format_window(window)} is running ({run.holder}); "
                    "resolve it once it has finished"
                )
            excused = run.with_(
                state=RunState.EXCUSED, finished_at=now, excused=RESOLVED, excused_detail=detail
            )
            ops = [Update(key, excused.to_data(), record.version)]
            increments = {WINDOWS_OPEN: -1} if atomic else {}
        ops.append(Merge(status_key_of(job.name), status_excused(excused, now), increments))
        try:
            store.commit(ops)
        except CommitConflict:
            continue
        return excused
    raise WindowActionRefused(f"{job.name} {format_window(window)} kept changing; try again")


def drop_resolved_letters(store: Store, dlq: DeadLetters, job: Job, window: datetime) -> int:
    """Remove from the broker's dead-letter queue the letters of ``job``'s ``window`` (matched
    by their ``job`` and ``run_key`` attributes, among the first :data:`PEEK_LIMIT` peeked),
    once the store records that window resolved; returns how many were removed. Nothing is
    removed unless the run record is ``excused`` (``resolved``) now, so a letter is never lost
    for a window that still needs a run. Such a letter could only be acknowledged unrun (the
    claim refuses a redrive of a resolved window) but would keep the watcher's queue-wide
    ``dead_letters`` alert on. Raises :class:`NotImplementedError` from a broker binding that
    cannot remove single letters (nothing removed)."""
    _, run = _run_of(store, job, window)
    if run is None or run.state is not RunState.EXCUSED or run.excused != RESOLVED:
        return 0
    run_key = f"{job.name}:{format_window(window)}"
    ids = [
        letter.message_id
        for letter in dlq.dlq_peek(PEEK_LIMIT)
        if letter.attributes.get("job") == job.name and letter.attributes.get("run_key") == run_key
    ]
    return dlq.dlq_remove(ids) if ids else 0
