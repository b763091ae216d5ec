"""Dead letters by window, on the command line: ``cronwarden dlq windows`` lists the
dead-lettered windows the store holds, ``cronwarden dlq redrive --job J --window W`` runs one
again, ``cronwarden dlq resolve --job J --window W --reason TEXT`` accounts for one without
running it.

The actions are :mod:`cronwarden.ops.windows` (the dashboard uses them too); the click commands
here are thin. :func:`mount` adds them to the ``dlq`` group.
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from ..jobs.definitions import Job, JobSet
from ..model.redaction import redact
from ..ops.windows import (
    PEEK_LIMIT,
    REDRIVE_REASON,
    StoreDeadLetter,
    WindowActionRefused,
    dead_lettered_windows,
    drop_resolved_letters,
    jobs_floor,
    redrive_window,
    resolve_window,
)

__all__ = [
    "REDRIVE_REASON",
    "StoreDeadLetter",
    "WindowActionRefused",
    "dead_lettered_windows",
    "jobs_floor",
    "mount",
    "redrive_window",
    "resolve_window",
]


# -- commands -------------------------------------------------------------------------------


def _letter_line(letter: StoreDeadLetter, what: str) -> str:
    where = "in the broker" if letter.in_broker else "not in the broker"
    return f"{letter.job} {what}  {where}  attempts {letter.attempts}  {letter.reason[:100]}"


def _drop_letters(store: Any, queue: Any, job: Job, when: datetime, run_key: str) -> None:
    """After a resolve: remove the broker's dead letters of the window (a redrive of them would
    be acknowledged unrun, and they keep the watcher's queue-wide alert on), saying how many;
    a broker that cannot remove them is named on stderr (the resolve stands: exit 0)."""
    try:
        dropped = drop_resolved_letters(store, queue, job, when)
    except Exception as exc:  # the resolve is recorded; the letter is a leftover, named
        click.echo(
            f"warning: the broker's dead letter(s) of {run_key} were not removed "
            f"({type(exc).__name__}: {redact(str(exc))}); a redrive of them is acknowledged "
            "without running, or remove them by hand",
            err=True,
        )
        return
    if dropped:
        click.echo(f"removed {dropped} dead letter(s) of {run_key} from the dead-letter queue")


def _window_arg(job: Job, text: str, now: datetime) -> datetime:
    from ..hosting.trigger import WindowRefused, check_window
    from ..model.schedule import parse_instant

    try:
        return check_window(job, parse_instant(text), now)
    except (ValueError, WindowRefused) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


def _setup(jobs_target: str, provider: str) -> tuple[JobSet, Any]:
    """The jobs and the provider of an existing state: every command here reads or changes a
    window that something ran (or failed to run) already, so a local state that does not exist
    (a mistyped ``--state``) is an error naming the path, never a new, empty state."""
    from .common import setup

    jobs, prov = setup(jobs_target, provider, read_only=True)
    return jobs, prov


def _job(jobs: JobSet, name: str) -> Job:
    job = jobs.get(name)
    if job is None:
        click.echo(f"error: unknown job {name!r}", err=True)
        sys.exit(2)
    return job


def _now() -> datetime:
    from ..run.engine import utcnow

    return utcnow()


def mount(dlq: click.Group) -> None:
    """Add ``dlq windows`` and ``dlq resolve`` to ``dlq``, and ``--job/--window`` to its
    ``redrive`` (without them it redrives the broker's DLQ as before)."""
    from .common import JOBS, PROVIDER

    @dlq.command("windows")
    @JOBS
    @PROVIDER
    def dlq_windows(jobs_target: str, provider: str) -> None:
        """Dead-lettered windows in the store (every run record it holds), and event
        consumers' dead-lettered runs by key, and whether the broker still holds each."""
        jobs, prov = _setup(jobs_target, provider)
        try:
            queue = prov.queue()
            letters = dead_lettered_windows(jobs, prov.store(), queue, _now())
            depth = queue.dlq_depth()
        finally:
            prov.close()
        windows = [letter for letter in letters if not letter.event_key]
        keyed = [letter for letter in letters if letter.event_key]
        click.echo(f"{len(windows)} dead-lettered window(s) in the store")
        for letter in windows:
            click.echo(_letter_line(letter, letter.window))
        if keyed:
            click.echo(
                f"{len(keyed)} dead-lettered event run(s) in the store "
                "(by key; `cronwarden dlq list` / `dlq redrive` handle their letters)"
            )
            for letter in keyed:
                click.echo(_letter_line(letter, f"key {letter.window}"))
        if depth > PEEK_LIMIT:
            click.echo(
                f"note: the broker holds {depth} dead letters; only the first {PEEK_LIMIT} "
                'were looked at, so a run shown "not in the broker" may be in it'
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
            store = prov.store()
            try:
                run = resolve_window(store, job, when, reason, actor=getpass.getuser(), now=_now())
            except WindowActionRefused as exc:
                click.echo(f"error: {exc}", err=True)
                sys.exit(2)
            click.echo(f"resolved {run.run_key}: {run.excused_detail}")
            _drop_letters(store, prov.queue(), job, when, run.run_key)
        finally:
            prov.close()

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
