"""``cronwarden pause / resume / snooze / unsnooze``: mounted by :mod:`cronwarden.cli` with
:func:`register` (see :mod:`cronwarden.jobs.pause` for what each records)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import click

from .common import JOBS, PROVIDER, Fail

_RELATIVE = re.compile(r"^\d+[smhdw]?(\d+[smhd])*$")


def _when(text: str | None, now: datetime) -> datetime | None:
    """An ISO time (UTC when no offset) or a duration from now such as ``8h`` / ``2d``
    (:class:`Fail`, exit 2, when it is neither or lies beyond the last representable time)."""
    if text is None:
        return None
    from ..model.durations import parse_duration
    from ..model.schedule import parse_instant

    if _RELATIVE.match(text.strip()):
        try:
            return now + parse_duration(text.strip(), field="--until")
        except OverflowError:
            raise Fail(f"--until {text!r}: out of range (too far ahead)") from None
    try:
        return parse_instant(text)
    except ValueError:
        raise Fail(f"--until {text!r}: an ISO time or a duration like 8h") from None


def _open(jobs_target: str, provider: str, name: str) -> tuple[Any, Any]:
    from .common import setup

    return setup(jobs_target, provider, job_name=name)


_BY = click.option("--by", help="Who (default: $USER@host).")


_REPLACE_PAUSE = click.option(
    "--replace", is_flag=True, help="Replace the pause in force (default: refuse, naming it)."
)
_REPLACE_SNOOZE = click.option(
    "--replace", is_flag=True, help="Replace the snooze in force (default: refuse, naming it)."
)


def _refused(exc: ValueError) -> Fail:
    """The one line (exit 2) for a refused pause / snooze: the API names the field first."""
    return Fail(str(exc) if str(exc).startswith("--") else f"--{exc}")


@click.command()
@JOBS
@PROVIDER
@_BY
@click.option("--reason", required=True, help="Why (shown in status and the audit log).")
@click.option("--until", help="ISO time or duration (8h); default: until resumed.")
@_REPLACE_PAUSE
@click.argument("job_name")
def pause(
    jobs_target: str,
    provider: str,
    by: str | None,
    reason: str,
    until: str | None,
    replace: bool,
    job_name: str,
) -> None:
    """Pause JOB_NAME: its scheduled fires are recorded as excused windows instead of running
    (runs by hand still go through) and the watcher stays quiet about them. A window already
    running finishes first. A job already paused is refused (exit 2, naming that pause)
    unless --replace."""
    from ..jobs import pause as paused
    from ..model.logs import configure, get_logger

    configure()
    now = datetime.now(UTC)
    end = _when(until, now)
    _, prov = _open(jobs_target, provider, job_name)
    try:
        view = paused.pause(
            prov.store(),
            job_name,
            reason=reason,
            by=by or paused.default_actor(),
            now=now,
            until=end,
            replace=replace,
        )
    except paused.AlreadyPaused as exc:
        raise Fail(f"{exc}; resume it first, or pass --replace to replace that pause") from None
    except ValueError as exc:
        raise _refused(exc) from None
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
@_REPLACE_SNOOZE
@click.argument("job_name")
def snooze(
    jobs_target: str,
    provider: str,
    by: str | None,
    until: str,
    reason: str,
    replace: bool,
    job_name: str,
) -> None:
    """Mute JOB_NAME's alerts until a time; what still fires then is announced once. A job
    already snoozed is refused (exit 2, naming that snooze) unless --replace."""
    from ..jobs import pause as paused
    from ..model.logs import configure, get_logger

    configure()
    now = datetime.now(UTC)
    end = _when(until, now)
    assert end is not None
    _, prov = _open(jobs_target, provider, job_name)
    try:
        paused.snooze(
            prov.store(),
            job_name,
            until=end,
            by=by or paused.default_actor(),
            now=now,
            reason=reason,
            replace=replace,
        )
    except paused.AlreadySnoozed as exc:
        raise Fail(f"{exc}; unsnooze it first, or pass --replace to replace that snooze") from None
    except ValueError as exc:
        raise _refused(exc) from None
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
    """End JOB_NAME's snooze now (like ``resume`` of a job not paused, a job not snoozed is
    said so, exit 0)."""
    from ..jobs import pause as paused
    from ..model.logs import configure
    from ..model.records import iso

    configure()
    _, prov = _open(jobs_target, provider, job_name)
    try:
        ended = paused.unsnooze(
            prov.store(), job_name, by=by or paused.default_actor(), now=datetime.now(UTC)
        )
    finally:
        prov.close()
    if ended is None:
        click.echo(f"{job_name} was not snoozed")
        return
    until = iso(ended.until) if ended.until else "?"
    click.echo(f"{job_name}: snooze ended (was snoozed by {ended.by} until {until})")


def register(group: click.Group) -> None:
    for command in (pause, resume, snooze, unsnooze):
        group.add_command(command)
