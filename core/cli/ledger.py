"""``cronwarden ledger``: list a job's quarantined (or any) ledger items and resolve them.

::

    cronwarden ledger list nightly-export [--window 2026-01-20T02:00Z] [--state all]
    cronwarden ledger resolve nightly-export --window 2026-01-20T02:00Z c-17 c-18 \\
        --as done --reason "checked the mail log: sent"
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from ..hosting.settings import PROVIDER_ENV
from ..jobs.loading import PROVIDERS
from ..model.errors import CronwardenError
from ..model.redaction import redact


def _provider(provider_name: str, *, read_only: bool = False) -> Any:
    from .common import setup

    return setup(None, provider_name, read_only=read_only)[1]


_provider_option = click.option(
    "--provider",
    "-p",
    envvar=PROVIDER_ENV,
    default="local",
    show_default=True,
    help=f"{', '.join(PROVIDERS)} (or $CRONWARDEN_PROVIDER; Postgres reads "
    "$CRONWARDEN_POSTGRES_DSN).",
)


class _Fail(click.ClickException):
    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"error: {redact(self.message)}", err=True)


@click.group()
def ledger() -> None:
    """Per-item ledgers: quarantined items and their resolution."""


@ledger.command("list")
@_provider_option
@click.argument("job_name")
@click.option("--window", help="Only this window (e.g. 2026-01-20T02:00Z).")
@click.option(
    "--state",
    default="quarantined",
    show_default=True,
    type=click.Choice(["quarantined", "pending", "done", "released", "all"]),
)
def ledger_list(provider: str, job_name: str, window: str | None, state: str) -> None:
    """Ledger items of JOB_NAME (default: the quarantined ones, awaiting a resolution).

    Exit status 2 when the store holds no records of JOB_NAME (or no run of it for --window):
    a mistyped name is not "nothing to resolve"."""
    from ..run.quarantine import list_items, nothing_on_record, window_on_record

    prov = _provider(provider, read_only=True)  # a listing creates no state
    try:
        store = prov.store()
        if window is not None:
            try:
                window = window_on_record(store, job_name, window)
            except ValueError as exc:
                raise _Fail(f"--window {window!r}: {exc}") from None
        found = list_items(store, job_name, window=window, state=None if state == "all" else state)
        # nothing found for a name the store does not know is a typo, not "nothing to resolve"
        missing = None if found else nothing_on_record(store, job_name, window)
    except CronwardenError as exc:
        raise _Fail(str(exc)) from None
    finally:
        prov.close()
    if missing is not None:
        raise _Fail(missing)
    if not found:
        where = f" in window {window}" if window is not None else ""
        click.echo(f"no {'' if state == 'all' else state + ' '}items for {job_name}{where}")
        return
    for entry in found:
        line = f"{entry.window}  {entry.item.key}  {entry.item.state}  run {entry.item.run_id}"
        if entry.resolution:
            r = entry.resolution
            line += f"  resolved as {r.get('as')} by {r.get('by')} at {r.get('at')}: "
            line += str(r.get("reason"))
        click.echo(line)


@ledger.command("resolve")
@_provider_option
@click.argument("job_name")
@click.argument("items", nargs=-1, required=True)
@click.option("--window", required=True, help="The window the items belong to.")
@click.option("--as", "as_", required=True, type=click.Choice(["done", "redo"]))
@click.option("--reason", required=True, help="Why (recorded on each item).")
def ledger_resolve(
    provider: str, job_name: str, items: tuple[str, ...], window: str, as_: str, reason: str
) -> None:
    """Resolve quarantined ITEMS of JOB_NAME's window: ``done`` (the side effect happened) or
    ``redo`` (release them and run the window again for them)."""
    from ..model.runs import request_attributes
    from ..run.quarantine import resolve, window_on_record

    prov = _provider(provider)
    try:
        store = prov.store()
        try:  # any ISO form of the window, as `ledger list` takes it
            window = window_on_record(store, job_name, window)
        except ValueError as exc:
            raise _Fail(f"--window {window!r}: {exc}") from None
        resolved = resolve(
            store, job_name, window, items, as_=as_, reason=reason, now=datetime.now(UTC)
        )
        if resolved.rerun is not None:
            prov.queue().publish(
                resolved.rerun.to_json(), attributes=request_attributes(resolved.rerun)
            )
    except CronwardenError as exc:
        raise _Fail(str(exc)) from None
    finally:
        prov.close()
    click.echo(f"resolved {len(resolved.items)} item(s) of {job_name} {window} as {as_}")
    if resolved.rerun is not None:
        click.echo(f"enqueued {resolved.rerun.run_key} to redo them")
