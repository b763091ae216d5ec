"""``cronwarden inventory`` and ``cronwarden import-crontab``: the path from a crontab to jobs.
Mounted by :mod:`cronwarden.cli` with :func:`mount`."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ..jobs.crontab import CronEntry, Crontab, is_system_crontab, parse_crontab
from ..model.redaction import redact

_TIMEZONE = click.option(
    "--timezone",
    "timezone",
    metavar="ZONE",
    help="The zone of the host the crontab ran on (cron reads schedules in the host's zone); "
    "CRON_TZ lines override it.",
)
_FORMAT = click.option(
    "--system/--user",
    "system",
    default=None,
    help="A system crontab (a user field after the schedule) or a user crontab; default: system "
    "for /etc/crontab and /etc/cron.d/*.",
)


def mount(cli: click.Group) -> None:
    cli.add_command(inventory)
    cli.add_command(import_crontab)


def _read(path: str, system: bool | None, timezone: str | None) -> Crontab:
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    is_system = is_system_crontab(path) if system is None else system
    return parse_crontab(text, source=path, system=is_system, timezone=timezone)


@click.command()
@click.argument("crontab", type=click.Path(exists=True, dir_okay=False))
@_TIMEZONE
@_FORMAT
@click.option(
    "--runs",
    default=3,
    show_default=True,
    type=click.IntRange(1, 100),
    help="How many next runs to show per line (1-100).",
)
def inventory(crontab: str, timezone: str | None, system: bool | None, runs: int) -> None:
    """List every line of CRONTAB: schedule in words, next runs, user, command, environment,
    and what needs a decision before it becomes a job. Exit 1 when a line cannot be translated."""
    table = _read(crontab, system, timezone)
    now = datetime.now(UTC)
    kind = "system crontab" if table.system else "user crontab"
    click.echo(f"{redact(table.source)} ({kind}): {len(table.entries)} schedule line(s)")
    if table.env:
        click.echo("environment:")
        for line in table.env:
            secret = "  (a secret: set it on the worker)" if line.secret else ""
            click.echo(f"  line {line.lineno}: {line.shown()}{secret}")
    for entry in table.entries:
        _show(entry, now, runs)
    for lineno, text, why in table.invalid:
        click.echo(f"\nline {lineno}: {redact(text.strip())}\n  cannot translate: {why}")
    refused = len(table.refused) + len(table.invalid)
    decide = sum(1 for e in table.entries if e.flags)
    click.echo(
        f"\n{len(table.entries) - len(table.refused)} line(s) translate, {refused} cannot, "
        f"{decide} need a decision"
    )
    if refused:
        sys.exit(1)


def _show(entry: CronEntry, now: datetime, runs: int) -> None:
    click.echo(f"\nline {entry.lineno}: {redact(entry.text.strip())}")
    if entry.refusal is not None:
        click.echo(f"  cannot translate: {entry.refusal}")
    else:
        schedule = entry.schedule
        assert schedule is not None
        zone = schedule.tz
        words = schedule.describe()
        if entry.spec.startswith("@"):
            words = f"{entry.spec} = {entry.cron}: {words}"
        click.echo(f"  schedule: {words}")
        upcoming = ", ".join(
            f"{when.astimezone(zone):%a %Y-%m-%d %H:%M %Z}" for when in entry.next_runs(now, runs)
        )
        click.echo(f"  next:     {upcoming}")
    click.echo(f"  user:     {entry.user or '(the crontab owner)'}")
    click.echo(f"  command:  {redact(entry.command)}")
    if entry.stdin is not None:
        click.echo(f"  input:    {redact(entry.stdin)!r}")
    shown = [line.shown() for line in entry.env if line.name not in ("CRON_TZ",)]
    if shown:
        click.echo(f"  env:      {', '.join(shown)}")
    for flag in entry.flags:
        click.echo(f"  decide:   [{flag.code}] {flag.message}")


@click.command("import-crontab")
@click.argument("crontab", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="Module path.")
@_TIMEZONE
@_FORMAT
@click.option(
    "--max-runtime",
    default="1h",
    show_default=True,
    help="Every job's max runtime: the command is killed after it (cron had no limit).",
)
@click.option(
    "--max-attempts",
    default=1,
    show_default=True,
    help="Attempts per run before dead-lettering (cron tried once; Pub/Sub needs 5 or more).",
)
@click.option(
    "--skip",
    "skip",
    multiple=True,
    type=int,
    metavar="LINE",
    help="Leave this line out (repeatable): the decision for a line that cannot be translated.",
)
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
def import_crontab(
    crontab: str,
    out: str,
    timezone: str | None,
    system: bool | None,
    max_runtime: str,
    max_attempts: int,
    skip: tuple[int, ...],
    force: bool,
) -> None:
    """Write a job module with one job per line of CRONTAB that runs the line's command
    unchanged. Refuses (exit 2, one line per problem) when a line cannot be translated."""
    from ..jobs.crontab_codegen import job_names, render_module
    from ..jobs.definitions import Retry, job
    from ..model.errors import InvalidJobDefinition

    table = _read(crontab, system, timezone)
    known = {e.lineno for e in table.entries} | {lineno for lineno, _t, _w in table.invalid}
    problems = [f"--skip {n}: line {n} is not a schedule line" for n in skip if n not in known]
    problems += [f"line {e.lineno}: {e.refusal}" for e in table.refused if e.lineno not in skip]
    problems += [f"line {n}: {why}" for n, _t, why in table.invalid if n not in skip]
    names = job_names([e for e in table.entries if e.lineno not in skip])
    try:
        Retry(max_attempts=max_attempts)
        for entry in table.entries:
            if entry.lineno in names and entry.refusal is None and entry.cron and entry.timezone:
                job(
                    names[entry.lineno],
                    cron=entry.cron,
                    timezone=entry.timezone,
                    max_runtime=max_runtime,
                )
    except InvalidJobDefinition as exc:
        problems.append(str(exc))
    if not problems and not names:
        problems.append(f"{crontab} has no schedule line to import")
    if problems:
        _refuse(problems, "nothing written; fix the lines or --skip them")
    target = Path(out)
    if target.exists() and target.resolve() == Path(crontab).resolve():
        _refuse([f"--out {out} is the crontab being read"], "write the module to another file")
    if target.exists() and not force:
        _refuse([f"{out} exists"], "pass --force to overwrite it")
    source = render_module(table, max_runtime=max_runtime, max_attempts=max_attempts, skip=skip)
    compile(source, out, "exec")  # a bug here must not leave a broken module behind
    target.write_text(source, encoding="utf-8")
    decide = sum(1 for e in table.entries if e.flags and e.lineno not in skip)
    click.echo(f"wrote {out}: {len(names)} job(s); {decide} line(s) flagged for review")


def _refuse(problems: list[str], hint: str) -> Any:
    for problem in problems:
        click.echo(f"error: {redact(problem)}", err=True)
    click.echo(f"error: {hint}", err=True)
    sys.exit(2)
