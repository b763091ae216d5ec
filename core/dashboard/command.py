"""``cronwarden dashboard``: serve the status page (needs ``cronwarden[dashboard]``).

Self-contained (its own ``--jobs`` / ``--provider`` options): the command line finds it through
the ``cronwarden.commands`` entry point (:mod:`cronwarden.cli.plugins`), so neither face imports
the other. A PostgreSQL DSN comes from ``$CRONWARDEN_POSTGRES_DSN``.
"""

from __future__ import annotations

import os

import click

from ..hosting.settings import JOBS_ENV, PROVIDER_ENV
from ..model.redaction import register_secret

TOKEN_ENV = "CRONWARDEN_DASHBOARD_TOKEN"  # noqa: S105 - a variable name; the token is never on argv
MIN_TOKEN = 16


class _Fail(click.ClickException):
    exit_code = 2


@click.command()
@click.option(
    "--jobs",
    "-j",
    "jobs_target",
    envvar=JOBS_ENV,
    required=True,
    metavar="MODULE",
    help="Job module: a dotted name or a .py path (or $CRONWARDEN_JOBS).",
)
@click.option(
    "--provider",
    "-p",
    envvar=PROVIDER_ENV,
    default="local",
    show_default=True,
    help="local, gcp, azure or postgres (or $CRONWARDEN_PROVIDER).",
)
@click.option("--port", default=8420, show_default=True, help="TCP port to listen on.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; anything but loopback exposes the page to the network.",
)
@click.option(
    "--actions",
    is_flag=True,
    help=f"Enable the redrive action; needs an access token in ${TOKEN_ENV}.",
)
def dashboard(jobs_target: str, provider: str, port: int, host: str, actions: bool) -> None:
    """Serve the status page: jobs, window timelines, runs and dead letters."""
    try:
        import uvicorn

        from .app import create_app
    except ImportError as exc:
        raise _Fail(
            f"the dashboard needs its extra: pip install 'cronwarden[dashboard]' ({exc.name})"
        ) from None
    from ..jobs.config import load_jobs, provider_from_env
    from ..model.logs import configure

    token = os.environ.get(TOKEN_ENV) or None
    if actions and (token is None or len(token) < MIN_TOKEN):
        raise _Fail(
            f"--actions needs an access token of at least {MIN_TOKEN} characters in ${TOKEN_ENV}"
        )
    register_secret(token)
    configure()
    jobs = load_jobs(jobs_target)
    prov = provider_from_env(provider)
    try:
        app = create_app(jobs, prov.store(), prov.queue(), actions_token=token if actions else None)
        state = "on" if actions else "off"
        click.echo(f"cronwarden dashboard on http://{host}:{port}/ (actions {state})")
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        prov.close()
