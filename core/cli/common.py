"""What every ``cronwarden`` command shares: its options, the one-line failure, the state it
opens, how it prints listings, and how it turns the runs it waited for into an exit status.

Command modules (:mod:`.notify`, :mod:`.windows`, :mod:`.ledger` …) import from here, never
from :mod:`.root`, so registering a module in the root group is one line and no import cycle.
Exit statuses, the contract every command keeps (defined in :mod:`cronwarden.ops.verdicts`,
which the dashboard's actions share):

* ``0``: every run the command waited for succeeded (or was a duplicate / excused);
* ``1``: one failed, was dead-lettered or is still retrying (the last line says which);
* ``2``: bad input: one line naming the thing at fault (``--debug`` adds the traceback);
* ``130`` / ``143``: stopped by SIGINT / SIGTERM after a graceful stop.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ..hosting.settings import JOBS_ENV, PROVIDER_ENV
from ..jobs.loading import PROVIDERS
from ..model.redaction import redact
from ..ops.verdicts import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from ..ops.verdicts import EXIT_FAILED as EXIT_FAILED
from ..ops.verdicts import EXIT_OK as EXIT_OK
from ..ops.verdicts import GOOD as GOOD
from ..ops.verdicts import PENDING as PENDING
from ..ops.verdicts import verdict_line as verdict_line

_F = TypeVar("_F", bound=Callable[..., Any])
#: the provider names a ``--provider`` option accepts, for its help text
PROVIDER_CHOICES = ", ".join(PROVIDERS)
STATE_ENV = "CRONWARDEN_LOCAL_PATH"  #: the local provider's state path (its queue: ``-queue``)
STATE_ENV_ALIAS = "CRONWARDEN_STATE"
DEBUG_ENV = "CRONWARDEN_DEBUG"
_DSN_KEY = "cronwarden.dsn"
_STATE_KEY = "cronwarden.state"
_OUTPUT_KEY = "cronwarden.output"


class Fail(click.ClickException):
    """One clear line on stderr, exit status 2 (bad input) unless told otherwise."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {redact(self.message)}", err=True)


_Fail = Fail  # the old private name


def _positive(_ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise click.BadParameter(f"must be at least 1, got {value}", param=param)
    return value


def positive_int(*names: str, default: int, help: str) -> Callable[[_F], _F]:
    """An integer option that refuses 0 and negatives (``--limit -1`` never means unlimited)."""
    return click.option(
        *names, type=int, default=default, show_default=True, callback=_positive, help=help
    )


def _jobs_value(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("is empty; give a module name or a .py path", param=param)
    return value


JOBS = click.option(
    "--jobs",
    "-j",
    "jobs_target",
    envvar=JOBS_ENV,
    required=True,
    metavar="MODULE",
    callback=_jobs_value,
    help="Job module: a dotted name or a .py path (or $CRONWARDEN_JOBS).",
)
OPTIONAL_JOBS = click.option(
    "--jobs",
    "-j",
    "jobs_target",
    envvar=JOBS_ENV,
    required=False,
    metavar="MODULE",
    callback=_jobs_value,
    help="Job module (optional here: adds each dead letter's run record).",
)
_PROVIDER = click.option(
    "--provider",
    "-p",
    envvar=PROVIDER_ENV,
    default="local",
    show_default=True,
    help=f"{PROVIDER_CHOICES} (or $CRONWARDEN_PROVIDER).",
)
_DSN = click.option(
    "--dsn",
    expose_value=False,
    callback=lambda ctx, _param, value: ctx.meta.__setitem__(_DSN_KEY, value) if value else None,
    help="PostgreSQL DSN for --provider postgres (prefer $CRONWARDEN_POSTGRES_DSN: other users "
    "can read a command line).",
)


def _remember_state(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None and not value.strip():  # `--state "$UNSET"`: not the default state
        raise click.BadParameter("is empty: name a state file, or leave --state out")
    if value:
        ctx.meta[_STATE_KEY] = value
        source = ctx.get_parameter_source(param.name or "state")
        ctx.meta[_STATE_KEY + ".given"] = source is click.core.ParameterSource.COMMANDLINE


_STATE = click.option(
    "--state",
    expose_value=False,
    envvar=[STATE_ENV, STATE_ENV_ALIAS],
    metavar="PATH",
    callback=_remember_state,
    help=f"State file of --provider local (or ${STATE_ENV}; default .cronwarden/state.db "
    "under the current directory). Its queue is PATH-queue.",
)
_OUTPUT = click.option(
    "--output",
    "-o",
    expose_value=False,
    type=click.Choice(["auto", "table", "json"]),
    default="auto",
    show_default=True,
    callback=lambda ctx, _param, value: ctx.meta.__setitem__(_OUTPUT_KEY, value),
    help="Listings as tables, or JSON lines (auto: JSON when stdout is not a terminal).",
)


def PROVIDER(command: Any) -> Any:
    """``--provider``, ``--dsn``, ``--state``, ``--output``: where state is, how to show it."""
    return _PROVIDER(_DSN(_STATE(_OUTPUT(command))))


def debug_enabled() -> bool:
    return "--debug" in sys.argv[1:] or (os.environ.get(DEBUG_ENV) or "") not in ("", "0")


# -- state ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateInfo:
    """Where a command's state is, in words for the ``status`` header and error lines."""

    provider: str
    where: str


def _meta() -> dict[str, Any]:
    ctx = click.get_current_context(silent=True)
    return ctx.meta if ctx is not None else {}


def state_path() -> str:
    """The local provider's state path this command uses (absolute)."""
    from cronwarden.adapters.local.settings import DEFAULT_PATH, PATH_ENV

    # commands without the --state option (their own --provider) still honour the environment
    return os.path.abspath(_meta().get(_STATE_KEY) or os.environ.get(PATH_ENV) or DEFAULT_PATH)


class NoState(Fail):
    """A read-only command found no local state (it never creates one)."""


def setup(
    jobs_target: str | None,
    provider_name: str,
    *,
    read_only: bool = False,
    job_name: str | None = None,
) -> tuple[Any, Any]:
    """Load the job module (and check ``job_name`` is one of its jobs), then build the
    provider. ``read_only``: the command only reads, so a missing local state is an error
    naming the path (:class:`NoState`) instead of a new, empty state."""
    from ..jobs.config import load_jobs, provider_from_env
    from ..model.logs import configure

    configure()
    jobs = load_jobs(jobs_target) if jobs_target else None
    if job_name is not None and jobs is not None and jobs.get(job_name) is None:
        known = ", ".join(j.name for j in jobs) or "none"
        raise Fail(f"unknown job {job_name!r} (known: {known})")
    name = provider_name.strip().lower()
    if not name:  # `--provider "$UNSET"`: not the default provider
        raise Fail(f"--provider is empty: name one of {PROVIDER_CHOICES}")
    options: dict[str, Any] = {}
    meta = _meta()
    if meta.get(_DSN_KEY):
        if name != "postgres":
            raise Fail("--dsn applies to --provider postgres only")
        options["dsn"] = meta[_DSN_KEY]
    if name == "local":
        options["path"] = _checked_local_state(state_path(), read_only=read_only)
    elif meta.get(_STATE_KEY + ".given"):
        raise Fail(f"--state applies to --provider local only (this is --provider {name})")
    provider = provider_from_env(name, **options)
    if name == "local":
        _open_local(provider)
    return jobs, provider


def _checked_local_state(path: str, *, read_only: bool) -> str:
    if os.path.isdir(path):
        raise Fail(f"state path {path} is a directory; --state names a file (e.g. {path}/state.db)")
    if read_only and not os.path.exists(path):
        raise NoState(
            f"no cronwarden state at {path} (nothing has run with this state); "
            f"pass --state PATH or set ${STATE_ENV}"
        )
    parent = os.path.dirname(path)
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise Fail(f"state path {path}: {parent} is not a directory")
    return path


def _open_local(provider: Any) -> None:
    """Open both SQLite files now, so a damaged one is named instead of a traceback later."""
    import sqlite3

    for label, opener, path in (
        ("state", provider.store, provider.path),
        ("queue", provider.queue, provider.path + "-queue"),
    ):
        try:
            opener()
        except sqlite3.DatabaseError as exc:
            raise Fail(
                f"{label} file {path} cannot be used: {exc} (move it aside to start afresh)"
            ) from exc


def state_info(provider_name: str, provider: Any) -> StateInfo:
    name = provider_name.strip().lower()
    if name == "local":
        return StateInfo(name, f"{state_path()} (queue: {state_path()}-queue)")
    shown = [f"{env}={os.environ[env]}" for env in _WHERE.get(name, ()) if os.environ.get(env)]
    return StateInfo(name, redact(", ".join(shown)) or "(settings from the environment)")


#: the settings that say where a provider's state is (no secrets: connection strings are not)
_WHERE = {
    "gcp": ("CRONWARDEN_GCP_PROJECT", "FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"),
    "azure": (
        "CRONWARDEN_AZURE_TABLE_ACCOUNT_URL",
        "CRONWARDEN_AZURE_TABLE",
        "CRONWARDEN_SERVICEBUS_NAMESPACE",
        "CRONWARDEN_SERVICEBUS_QUEUE",
    ),
    "postgres": (),
    "s3": ("CRONWARDEN_S3_BUCKET", "CRONWARDEN_S3_PREFIX", "CRONWARDEN_SQS_QUEUE"),
    "blob": ("CRONWARDEN_BLOB_CONTAINER", "CRONWARDEN_BLOB_PREFIX", "CRONWARDEN_SERVICEBUS_QUEUE"),
    "gcs": ("CRONWARDEN_GCS_BUCKET", "CRONWARDEN_GCS_PREFIX", "CRONWARDEN_GCP_PROJECT"),
}


# -- output ---------------------------------------------------------------------------------


def json_output() -> bool:
    """Whether listings are JSON lines: ``--output json``, or ``auto`` on a pipe."""
    chosen = _meta().get(_OUTPUT_KEY, "auto")
    if chosen == "auto":
        return not sys.stdout.isatty()
    return bool(chosen == "json")


def _jsonable(value: Any) -> Any:
    from datetime import datetime

    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def emit_rows(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Mapping[str, Any]],
    *,
    cells: Any = None,
    footer: str | None = None,
) -> None:
    """Print ``rows`` as one table whose cells fold (never cut) or, in JSON mode, one JSON
    object per row. ``cells(row)`` gives the table's text per column (default: ``str``)."""
    rows = list(rows)
    if json_output():
        for row in rows:
            click.echo(json.dumps(_jsonable(row), ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # every cell as plain Text: a run's error, a job's description or a dead letter's reason is
    # data, never Rich markup ("[/data]" in an error made the table fail; "[link=...]" hid a
    # URL), and control characters (terminal escapes) are shown, not sent
    table = Table(title=_plain(title))
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        texts = cells(row) if cells else [str(row.get(c, "")) for c in columns]
        table.add_row(*(Text(_plain(str(text))) for text in texts))
    console = Console()
    console.print(table)
    if footer:
        console.print(Text(_plain(footer)))


def _plain(text: str) -> str:
    """``text`` with control characters other than newline and tab shown escaped (an ESC or
    a right-to-left override in stored data must not steer the terminal)."""
    if text.isprintable() or all(c.isprintable() or c in "\n\t" for c in text):
        return text
    return "".join(
        c if c.isprintable() or c in "\n\t" else c.encode("unicode_escape").decode("ascii")
        for c in text
    )
