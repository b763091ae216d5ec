"""Dead letters by window: the store's dead-lettered record is the truth.

``cronwarden dlq windows`` lists the dead-lettered windows the store holds, saying for each
whether its message is in the broker's dead-letter queue ("not in the broker": the worker died
between the dead-letter commit and the broker call, or the message expired).
``cronwarden dlq redrive --job J --window W`` runs such a window again, whether or not the
broker still holds its message; ``cronwarden dlq resolve --job J --window W --reason TEXT``
accounts for a window without running it (recorded: who, when, why).

The functions (:func:`dead_lettered_windows`, :func:`redrive_window`, :func:`resolve_window`)
are the API; the click commands are thin. :func:`mount` adds them to the ``dlq`` group.
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import click

from .errors import CommitConflict
from .jobs import Job, JobSet
from .model import RunRequest, RunState, format_window
from .ports import REDRIVE_ATTRIBUTE, RUN, Create, DeadLetters, Merge, Publisher, Store, Update
from .records import (
    WINDOWS_OPEN,
    WINDOWS_RECORDED,
    RunRecord,
    iso,
    run_key_of,
    status_excused,
    status_key_of,
)

REDRIVE_REASON = "redrive"  #: the run request reason of a redrive by window


class WindowActionRefused(Exception):
    """The window can not be redriven / resolved as asked (the message says why)."""


@dataclass(frozen=True)
class StoreDeadLetter:
    job: str
    window: str
    reason: str
    attempts: int
    in_broker: bool
    finished_at: datetime | None


def dead_lettered_windows(
    jobs: JobSet, store: Store, dlq: DeadLetters | None, now: datetime, *, horizon: timedelta
) -> list[StoreDeadLetter]:
    """Every dead-lettered window in the store within ``horizon``, oldest first per job;
    ``in_broker`` says whether the broker's DLQ holds its message (peeked, up to 1000)."""
    in_broker: set[str] = set()
    if dlq is not None:
        in_broker = {letter.attributes.get("run_key", "") for letter in dlq.dlq_peek(1000)}
    start = format_window(jobs_floor(now - horizon))
    found: list[StoreDeadLetter] = []
    for job in jobs:
        for record in store.query(RUN, job.name, start=start):
            run = RunRecord.from_data(record.data)
            if run.state is RunState.DEAD_LETTERED:
                found.append(
                    StoreDeadLetter(
                        job.name,
                        record.key.id,
                        run.error or "",
                        run.attempt - run.budget_start,
                        run.run_key in in_broker,
                        run.finished_at,
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
                state=RunState.EXCUSED, finished_at=now, excused="resolved", excused_detail=detail
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
                state=RunState.EXCUSED, finished_at=now, excused="resolved", excused_detail=detail
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


# -- commands -------------------------------------------------------------------------------


def _window_arg(job: Job, text: str, now: datetime) -> datetime:
    from .trigger import WindowRefused, check_window

    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return check_window(job, value, now)
    except (ValueError, WindowRefused) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


def _setup(jobs_target: str, provider: str) -> tuple[JobSet, Any]:
    from .cli import _setup as setup

    jobs, prov = setup(jobs_target, provider)
    return jobs, prov


def _job(jobs: JobSet, name: str) -> Job:
    job = jobs.get(name)
    if job is None:
        click.echo(f"error: unknown job {name!r}", err=True)
        sys.exit(2)
    return job


def _now() -> datetime:
    from .engine import utcnow

    return utcnow()


def mount(dlq: click.Group) -> None:
    """Add ``dlq windows`` and ``dlq resolve`` to ``dlq``, and ``--job/--window`` to its
    ``redrive`` (without them it redrives the broker's DLQ as before)."""
    from .cli_common import JOBS, PROVIDER

    @dlq.command("windows")
    @JOBS
    @PROVIDER
    def dlq_windows(jobs_target: str, provider: str) -> None:
        """Dead-lettered windows in the store, and whether the broker still holds each."""
        jobs, prov = _setup(jobs_target, provider)
        try:
            letters = dead_lettered_windows(
                jobs, prov.store(), prov.queue(), _now(), horizon=timedelta(days=30)
            )
        finally:
            prov.close()
        click.echo(f"{len(letters)} dead-lettered window(s) in the store")
        for letter in letters:
            where = "in the broker" if letter.in_broker else "not in the broker"
            click.echo(
                f"{letter.job} {letter.window}  {where}  attempts {letter.attempts}  "
                f"{letter.reason[:100]}"
            )

    @dlq.command("resolve")
    @JOBS
    @PROVIDER
    @click.option("--job", "job_name", required=True)
    @click.option("--window", required=True, help="The window (ISO, UTC).")
    @click.option("--reason", required=True, help="Why this window needs no run (recorded).")
    def dlq_resolve(
        jobs_target: str, provider: str, job_name: str, window: str, reason: str
    ) -> None:
        """Account for a dead-lettered (or never-run) window without running it."""
        jobs, prov = _setup(jobs_target, provider)
        job = _job(jobs, job_name)
        when = _window_arg(job, window, _now())
        try:
            run = resolve_window(
                prov.store(), job, when, reason, actor=getpass.getuser(), now=_now()
            )
        except WindowActionRefused as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        finally:
            prov.close()
        click.echo(f"resolved {run.run_key}: {run.excused_detail}")

    original = dlq.commands["redrive"]
    previous: Callable[..., Any] = original.callback  # type: ignore[assignment]

    @click.pass_context
    def redrive(ctx: click.Context, /, **kwargs: Any) -> None:
        job_name, window = kwargs.pop("job_name"), kwargs.pop("window")
        jobs_target = kwargs.get("jobs_target")  # the redrive command's own --jobs
        if job_name is None and window is None:
            ctx.invoke(previous, **kwargs)
            return
        if not (job_name and window and jobs_target):
            click.echo("error: --job, --window and --jobs go together", err=True)
            sys.exit(2)
        jobs, prov = _setup(jobs_target, kwargs["provider"])
        job = _job(jobs, job_name)
        when = _window_arg(job, window, _now())
        try:
            request = redrive_window(prov.store(), prov.queue(), job, when)
        except WindowActionRefused as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        finally:
            prov.close()
        click.echo(f"redrove {request.run_key}")

    original.callback = redrive
    original.params += [
        click.Option(["--job", "job_name"], help="Redrive one window of this job (by window)."),
        click.Option(["--window"], help="The dead-lettered window (ISO, UTC)."),
    ]
