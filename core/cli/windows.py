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
from datetime import datetime, timedelta
from typing import Any

import click

from ..jobs.definitions import Job, JobSet
from ..ops.windows import (
    REDRIVE_REASON,
    StoreDeadLetter,
    WindowActionRefused,
    dead_lettered_windows,
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


def _window_arg(job: Job, text: str, now: datetime) -> datetime:
    from ..hosting.trigger import WindowRefused, check_window
    from ..model.schedule import parse_instant

    try:
        return check_window(job, parse_instant(text), now)
    except (ValueError, WindowRefused) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


def _setup(jobs_target: str, provider: str) -> tuple[JobSet, Any]:
    from .common import setup

    jobs, prov = setup(jobs_target, provider)
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
