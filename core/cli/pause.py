"""``cronwarden pause / resume / snooze / unsnooze``: mounted by :mod:`cronwarden.cli` with
:func:`register` (see :mod:`cronwarden.jobs.pause` for what each records)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import click

from .common import JOBS, PROVIDER

_RELATIVE = re.compile(r"^\d+[smhdw]?(\d+[smhd])*$")


def _when(text: str | None, now: datetime) -> datetime | None:
    """An ISO time (UTC when no offset) or a duration from now such as ``8h`` / ``2d``."""
    if text is None:
        return None
    from ..model.durations import parse_duration
    from ..model.schedule import parse_instant

    if _RELATIVE.match(text.strip()):
        return now + parse_duration(text.strip(), field="--until")
    try:
        return parse_instant(text)
    except ValueError:
        raise click.BadParameter(f"{text!r}: an ISO time or a duration like 8h") from None


def _open(jobs_target: str, provider: str, name: str) -> tuple[Any, Any]:
    from .common import setup

    return setup(jobs_target, provider, job_name=name)


_BY = click.option("--by", help="Who (default: $USER@host).")


@click.command()
@JOBS
@PROVIDER
@_BY
@click.option("--reason", required=True, help="Why (shown in status and the audit log).")
@click.option("--until", help="ISO time or duration (8h); default: until resumed.")
@click.argument("job_name")
def pause(
    jobs_target: str, provider: str, by: str | None, reason: str, until: str | None, job_name: str
) -> None:
    """Pause JOB_NAME: its scheduled fires are recorded as excused windows instead of running
    (runs by hand still go through) and the watcher stays quiet about them. A window already
    running finishes first."""
    from ..jobs import pause as paused
    from ..model.logs import configure, get_logger

    configure()
    _, prov = _open(jobs_target, provider, job_name)
    now = datetime.now(UTC)
    try:
        view = paused.pause(
            prov.store(),
            job_name,
            reason=reason,
            by=by or paused.default_actor(),
            now=now,
            until=_when(until, now),
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--until/--reason") from None
    finally:
        prov.close()
    get_logger("ops").info(
        "%s %s", job_name, view.describe(), extra={"event": "job.paused", "job": job_name}
    )
    click.echo(f"{job_name}: {view.describe()}")


@click.command()
@JOBS
@PROVIDER
@_BY
@click.argument("job_name")
def resume(jobs_target: str, provider: str, by: str | None, job_name: str) -> None:
    """Resume JOB_NAME."""
    from ..jobs import pause as paused
    from ..model.logs import configure, get_logger

    configure()
    _, prov = _open(jobs_target, provider, job_name)
    try:
        ended = paused.resume(
            prov.store(), job_name, by=by or paused.default_actor(), now=datetime.now(UTC)
        )
    finally:
        prov.close()
    if ended is None:
        click.echo(f"{job_name} was not paused")
        return
    get_logger("ops").info("%s resumed", job_name, extra={"event": "job.resumed", "job": job_name})
    click.echo(f"{job_name} resumed (was {ended.describe()})")


@click.command()
@JOBS
@PROVIDER
@_BY
@click.option("--until", required=True, help="ISO time or duration (8h).")
@click.option("--reason", default="", help="Why.")
@click.argument("job_name")
def snooze(
    jobs_target: str, provider: str, by: str | None, until: str, reason: str, job_name: str
) -> None:
    """Mute JOB_NAME's alerts until a time; what still fires then is announced once."""
    from ..jobs import pause as paused
    from ..model.logs import configure, get_logger

    configure()
    _, prov = _open(jobs_target, provider, job_name)
    now = datetime.now(UTC)
    end = _when(until, now)
    assert end is not None
    try:
        paused.snooze(
            prov.store(),
            job_name,
            until=end,
            by=by or paused.default_actor(),
            now=now,
            reason=reason,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--until") from None
    finally:
        prov.close()
    get_logger("ops").info("%s snoozed", job_name, extra={"event": "job.snoozed", "job": job_name})
    click.echo(f"{job_name}: alerts snoozed until {end.isoformat()}")


@click.command()
@JOBS
@PROVIDER
@_BY
@click.argument("job_name")
def unsnooze(jobs_target: str, provider: str, by: str | None, job_name: str) -> None:
    """End JOB_NAME's snooze now."""
    from ..jobs import pause as paused
    from ..model.logs import configure

    configure()
    _, prov = _open(jobs_target, provider, job_name)
    try:
        paused.unsnooze(
            prov.store(), job_name, by=by or paused.default_actor(), now=datetime.now(UTC)
        )
    finally:
        prov.close()
    click.echo(f"{job_name}: snooze ended")


def register(group: click.Group) -> None:
    for command in (pause, resume, snooze, unsnooze):
        group.add_command(command)
