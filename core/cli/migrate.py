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
import math
import os
import shlex
import sys
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

import click

from ..jobs.loading import PROVIDERS
from .common import EXIT_FAILED, JOBS, STATE_ENV, Fail

_NAMES = tuple(sorted(PROVIDERS))  #: every provider the loader knows
_DEFAULT_LOCAL_PATH = os.path.join(".cronwarden", "state.db")
#: the longest ``--wait`` (a year): a run in flight outlasting it is taken over anyway
MAX_WAIT = 365 * 86400.0


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


def _local_path() -> str:
    """The local provider's own reading of its path (``$CRONWARDEN_LOCAL_PATH``), absolute."""
    return os.path.abspath(os.environ.get(STATE_ENV) or _DEFAULT_LOCAL_PATH)


def _postgres_target(dsn: str, schema: str) -> str | None:
    """``host:port/database schema S`` of a Postgres DSN (URL or ``key=value`` form; libpq's
    ``PG*`` variables and defaults fill what it leaves out), never its password; ``None`` when
    the DSN cannot be read here (the provider then says what is wrong with it)."""
    from urllib.parse import parse_qs, urlsplit

    fields: dict[str, str] = {}
    try:
        if "://" in dsn:
            url = urlsplit(dsn)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            fields = {
                "host": query.get("host") or url.hostname or "",
                "port": query.get("port") or str(url.port or ""),
                "dbname": query.get("dbname") or url.path.lstrip("/"),
                "user": query.get("user") or url.username or "",
            }
        else:
            fields = dict(part.split("=", 1) for part in shlex.split(dsn) if "=" in part)
    except ValueError:
        return None
    host = (fields.get("host") or os.environ.get("PGHOST") or "localhost").lower()
    port = fields.get("port") or os.environ.get("PGPORT") or "5432"
    user = fields.get("user") or os.environ.get("PGUSER") or ""
    database = fields.get("dbname") or os.environ.get("PGDATABASE") or user
    return f"{host}:{port}/{database} schema {schema}"


def store_identity(name: str) -> str | None:
    """What identifies the store provider ``name`` reaches under the current environment, as
    one line without secrets (two sides with equal identities are one store); ``None`` when
    not cheaply known (the provider's own settings error is left to building it)."""
    from ..model.errors import ConfigurationError

    try:
        if name == "local":
            return f"local {os.path.realpath(_local_path())}"
        if name == "postgres":
            from ..adapters.postgres.settings import PostgresSettings

            pg = PostgresSettings.from_env()
            target = _postgres_target(pg.dsn, pg.schema)
            return None if target is None else f"postgres {target}"
        if name == "aws":
            from ..adapters.aws.settings import AwsSettings

            aws = AwsSettings.from_env()
            return f"aws {aws.region} {aws.endpoint_url or ''} table {aws.table}"
        if name == "gcp":
            from ..adapters.gcp.settings import GcpSettings

            gcp = GcpSettings.from_env()
            where = f"{gcp.project} {gcp.firestore_emulator_host}".strip()
            return f"gcp {where} database {gcp.database} prefix {gcp.collection_prefix!r}"
        if name == "azure":
            from ..adapters.azure.settings import AzureSettings

            az = AzureSettings.from_env()
            parts = dict(
                p.split("=", 1) for p in az.storage_connection_string.split(";") if "=" in p
            )
            account = (
                az.table_account_url.rstrip("/").lower()
                or parts.get("TableEndpoint", "").rstrip("/").lower()
                or parts.get("AccountName", "")
            )
            return f"azure {account} table {az.table}" if account else None
    except (ConfigurationError, ImportError):
        return None
    return None


def _absent(name: str, *, queue: bool = False) -> str | None:
    """The local file of a side (its state, or with ``queue`` its queue) when it does not
    exist: opening it would create it."""
    if name != "local":
        return None
    path = _local_path() + ("-queue" if queue else "")
    return None if os.path.exists(path) else path


def _side(
    name: str,
    label: str | None,
    env: Mapping[str, str],
    *,
    must_exist: bool = False,
    read_only: bool = False,
) -> tuple[Any, Any]:
    """The provider of one side, built (and its store and queue reached once) under ``env``.

    ``read_only`` (``--dry-run``, ``--verify``): a local file that does not exist is not
    created; an empty one in a scratch folder stands in for it (said on stderr)."""
    from ..jobs.loading import provider_from_env
    from ..model.ports import STATUS, Key
    from ..ops.migrate import Side

    with overlay(env):
        if must_exist and name == "local":
            # a missing source is an error, never a new empty state fenced and "moved"
            path = _local_path()
            if not os.path.exists(path):
                raise Fail(f"source state {path} does not exist (set {STATE_ENV})")
        missing = (_absent(name), _absent(name, queue=True)) if read_only else (None, None)
        if any(missing):
            side = label or name
            paths = " and ".join(filter(None, missing))
            # on stderr: stdout stays the plan (or the verdict), as when both files exist
            click.echo(f"note: {side}: {paths} not there (not created; read as empty)", err=True)
            provider = provider_from_env(name)  # builds no client: the files open on first use
            empty = _scratch_local()  # an empty state of the same kind, in a scratch folder
            store = empty.store() if missing[0] else provider.store()
            queue = empty.queue() if missing[1] else provider.queue()
            return provider, Side(side, store, queue)
        provider = provider_from_env(name)
        store, queue = provider.store(), provider.queue()
        store.get(Key(STATUS, "_migrate"))  # clients are made now, under this side's settings
    return provider, Side(label or name, store, queue)


def _scratch_local() -> Any:
    """A local provider on an empty state in a scratch folder, removed (with it closed) when
    the command ends: what a side whose files do not exist reads as, nothing made there."""
    import shutil
    import tempfile

    from ..jobs.loading import provider_from_env

    folder = tempfile.mkdtemp(prefix="cronwarden-migrate-")
    provider = provider_from_env("local", path=os.path.join(folder, "state.db"))

    def remove() -> None:
        provider.close()
        shutil.rmtree(folder, ignore_errors=True)

    click.get_current_context().call_on_close(remove)
    return provider


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
    from ..ops.migrate import (
        DestinationHasState,
        Migration,
        MigrationError,
        left_behind,
        scheduled_jobs,
    )
    from ..ops.migrate_check import plan
    from ..ops.migrate_check import verify as check

    if sum((prepare, dry_run, verify)) > 1:
        raise Fail("--prepare, --dry-run and --verify are separate runs; give one")
    if not (math.isfinite(wait) and 0 <= wait <= MAX_WAIT):
        within = "" if wait < 0 else f" (a finite number, at most {MAX_WAIT:.0f})"
        raise Fail(f"--wait must be 0 or more seconds, got {wait}{within}")
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
    with overlay(src_env):
        src_is = store_identity(source)
    with overlay(dst_env):
        dst_is = store_identity(destination)
    if src_is is not None and src_is == dst_is:
        # labels differ, yet both sides are one store: the "move" would fence the jobs
        # against themselves and delete the dead letters it had just "moved"
        raise Fail(f"--from and --to are the same store ({src_is}); nothing to move")
    read_only = dry_run or verify
    opened: list[Any] = []
    try:
        src_provider, src = _side(source, from_label, src_env, must_exist=True, read_only=read_only)
        opened.append(src_provider)
        dst_provider, dst = _side(destination, to_label, dst_env, read_only=read_only)
        opened.append(dst_provider)
        with overlay({**src_env, **dst_env} if agree else {}):
            left = left_behind(src, (job.name for job in chosen))
            if not verify:
                # before anything is written or planned: the dry run refuses as the move does
                held = Migration(chosen, src, dst).conflicts()
                if held:
                    raise Fail(str(DestinationHasState(dst.label, held)))
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
            except DestinationHasState as exc:  # it ran a job since the check above
                raise Fail(str(exc)) from exc
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
