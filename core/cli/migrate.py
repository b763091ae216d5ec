"""``cronwarden migrate``: move jobs and their state from one provider to another, live
(the procedure: :mod:`cronwarden.ops.migrate`; docs/switching-providers.md).

Each side is configured the way ``cronwarden run`` configures a provider: a provider name
(``--from`` / ``--to``) and that provider's environment variables. Variables both sides share
the names of (two Postgres DSNs, two local paths) go in an env file per side (``--from-env`` /
``--to-env``: ``NAME=value`` lines, ``#`` comments): a side's file is applied over the process
environment while that side is built (and for the whole run when the two files do not
disagree).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

import click

from ..jobs.loading import PROVIDERS
from .common import EXIT_FAILED, JOBS, STATE_ENV, Fail

_NAMES = tuple(sorted(PROVIDERS))  #: every provider the loader knows
_DEFAULT_LOCAL_PATH = os.path.join(".cronwarden", "state.db")


def read_env_file(path: str) -> dict[str, str]:
    """``NAME=value`` lines (optionally ``export NAME=value``; quotes around the value are
    dropped); a line that is neither blank, a comment nor an assignment is an error."""
    values: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise Fail(f"env file {path}: {exc.strerror or exc}") from exc
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        name, sep, value = line.partition("=")
        if not sep or not name.strip().isidentifier():
            raise Fail(f"env file {path}:{number}: expected NAME=value")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name.strip()] = value
    return values


@contextlib.contextmanager
def overlay(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in ``os.environ`` inside the block, the previous values back after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def _side(
    name: str, label: str | None, env: Mapping[str, str], *, must_exist: bool = False
) -> tuple[Any, Any]:
    """The provider of one side, built (and its store and queue reached once) under ``env``."""
    from ..jobs.loading import provider_from_env
    from ..model.ports import STATUS, Key
    from ..ops.migrate import Side

    with overlay(env):
        if must_exist and name == "local":
            # the local provider's own reading of its path (a missing source is an error, never
            # a new empty state fenced and "moved")
            path = os.path.abspath(os.environ.get(STATE_ENV) or _DEFAULT_LOCAL_PATH)
            if not os.path.exists(path):
                raise Fail(f"source state {path} does not exist (set {STATE_ENV})")
        provider = provider_from_env(name)
        store, queue = provider.store(), provider.queue()
        store.get(Key(STATUS, "_migrate"))  # clients are made now, under this side's settings
    return provider, Side(label or name, store, queue)


@click.command()
@JOBS
@click.option("--from", "source", required=True, type=click.Choice(_NAMES), help="Source.")
@click.option("--to", "destination", required=True, type=click.Choice(_NAMES), help="Target.")
@click.option("--from-env", type=click.Path(dir_okay=False), help="Env file of the source.")
@click.option("--to-env", type=click.Path(dir_okay=False), help="Env file of the destination.")
@click.option("--from-label", help="Name of the source in marks (default: --from).")
@click.option("--to-label", help="Name of the destination in marks (default: --to).")
@click.option("--job", "names", multiple=True, help="Move only this job (repeatable).")
@click.option(
    "--prepare",
    is_flag=True,
    help="Only close the destination (before its schedulers start); the move comes later.",
)
@click.option("--dry-run", is_flag=True, help="Print what would move; write nothing.")
@click.option("--verify", is_flag=True, help="Compare what moved; exit 1 on any difference.")
@click.option(
    "--wait",
    type=float,
    default=600.0,
    show_default=True,
    help="Seconds to wait for a run in flight before taking it over.",
)
def migrate(
    jobs_target: str,
    source: str,
    destination: str,
    from_env: str | None,
    to_env: str | None,
    from_label: str | None,
    to_label: str | None,
    names: tuple[str, ...],
    prepare: bool,
    dry_run: bool,
    verify: bool,
    wait: float,
) -> None:
    """Move jobs and their state from one provider to another while both keep firing: the
    source is fenced per job (its claims refused as ``moved``), the state copied, then the
    destination opens. Safe to repeat: a run killed anywhere is finished by running it again."""
    from ..jobs.config import load_jobs
    from ..model.logs import configure
    from ..ops.migrate import Migration, MigrationError, left_behind, scheduled_jobs
    from ..ops.migrate_check import plan
    from ..ops.migrate_check import verify as check

    if sum((prepare, dry_run, verify)) > 1:
        raise Fail("--prepare, --dry-run and --verify are separate runs; give one")
    if wait < 0:
        raise Fail(f"--wait must be 0 or more seconds, got {wait}")
    configure()
    src_env = read_env_file(from_env) if from_env else {}
    dst_env = read_env_file(to_env) if to_env else {}
    shared = set(src_env) & set(dst_env)
    agree = all(src_env[n] == dst_env[n] for n in shared)
    jobs = load_jobs(jobs_target)
    try:
        chosen = scheduled_jobs(jobs, names)
    except MigrationError as exc:
        raise Fail(str(exc)) from exc
    if (from_label or source) == (to_label or destination):
        label = from_label or source
        raise Fail(f"--from and --to are both {label!r}; give --from-label / --to-label")
    opened: list[Any] = []
    try:
        src_provider, src = _side(source, from_label, src_env, must_exist=True)
        opened.append(src_provider)
        dst_provider, dst = _side(destination, to_label, dst_env)
        opened.append(dst_provider)
        with overlay({**src_env, **dst_env} if agree else {}):
            left = left_behind(src, (job.name for job in chosen))
            if dry_run:
                for line in plan(chosen, src, dst) + left.lines(src.label):
                    click.echo(line)
                click.echo("dry run: nothing written")
                return
            if verify:
                _verify(check(chosen, src, dst), left, src.label, whole=not names)
                return
            migration = Migration(chosen, src, dst, wait=timedelta(seconds=wait), say=click.echo)
            try:
                if prepare:
                    migration.prepare()
                    click.echo(f"prepared: {dst.label} waits for the state of {len(chosen)} job(s)")
                    return
                report = migration.run()
                left = left_behind(src, (job.name for job in chosen))
            except MigrationError as exc:
                click.echo(f"error: {exc}", err=True)
                sys.exit(EXIT_FAILED)
    finally:
        for provider in opened:
            provider.close()
    for line in left.lines(src.label):
        click.echo(line)
    if not names and left.letters:
        # every job of the module moved, yet dead letters stay: retiring the source (what a
        # whole migration is for) would lose them; with --job the rest is knowingly for later
        report.problems.append(_stranded(left, src.label))
    if report.problems:
        for problem in report.problems:
            click.echo(f"error: {problem}", err=True)
        sys.exit(EXIT_FAILED)
    click.echo(f"moved {len(report.jobs)} job(s) from {src.label} to {dst.label}")


def _stranded(left: Any, label: str) -> str:
    return (
        f"{left.letters} dead letter(s) that did not move stay on {label}, their windows "
        "unaccounted: declare their jobs and migrate again, or account for them there "
        "(`cronwarden dlq list`, `cronwarden dlq resolve`) before retiring it"
    )


def _verify(checks: list[Any], left: Any, label: str, *, whole: bool) -> None:
    differences = 0
    for job_check in checks:
        for line in job_check.lines:
            click.echo(f"{job_check.job}: {line}")
        for difference in job_check.differences:
            click.echo(f"{job_check.job}: DIFFERENCE: {difference}")
        differences += len(job_check.differences)
    for line in left.lines(label):
        click.echo(line)
    if whole and left.letters:
        click.echo(f"verify: {_stranded(left, label)}", err=True)
        differences += left.letters
    if differences:
        click.echo(f"verify: {differences} difference(s)", err=True)
        sys.exit(EXIT_FAILED)
    click.echo(f"verify: {len(checks)} job(s) moved as claimed")
