"""``cronwarden dashboard``: serve the status page (needs ``cronwarden[dashboard]``).

Self-contained (its own ``--jobs`` / ``--provider`` options): the command line finds it through
the ``cronwarden.commands`` entry point (:mod:`cronwarden.cli.plugins`), so neither face imports
the other. A PostgreSQL DSN comes from ``$CRONWARDEN_POSTGRES_DSN``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re

import click

from ..hosting.settings import JOBS_ENV, PROVIDER_ENV
from ..jobs.loading import PROVIDERS
from ..model.redaction import register_secret

TOKEN_ENV = "CRONWARDEN_DASHBOARD_TOKEN"  # noqa: S105 - a variable name; the token is never on argv
HOSTS_ENV = "CRONWARDEN_DASHBOARD_ALLOWED_HOSTS"
MIN_TOKEN = 16
#: a host name, ``*.domain``, an IPv4 address or a bracketed IPv6 literal; no scheme, no port
_HOST = re.compile(
    r"(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\]"
)


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
    help=f"{', '.join(PROVIDERS)} (or $CRONWARDEN_PROVIDER).",
)
@click.option("--port", default=8420, show_default=True, help="TCP port to listen on.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; anything but loopback exposes the page to the network.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    envvar=HOSTS_ENV,
    metavar="HOST",
    help="Also serve requests whose Host header names HOST (repeatable; *.example.com allowed; "
    f"or ${HOSTS_ENV}, space-separated). Default: only the --host address and localhost.",
)
@click.option(
    "--actions",
    is_flag=True,
    help=f"Enable the redrive action; needs an access token in ${TOKEN_ENV}.",
)
def dashboard(
    jobs_target: str,
    provider: str,
    port: int,
    host: str,
    allowed_hosts: tuple[str, ...],
    actions: bool,
) -> None:
    """Serve the status page: jobs, window timelines, runs and dead letters."""
    hosts = served_hosts(host, allowed_hosts)
    try:
        import uvicorn

        from .app import create_app, host_pattern
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
        app = create_app(
            jobs,
            prov.store(),
            prov.queue(),
            actions_token=token if actions else None,
            allowed_hosts=hosts,
        )
        state = "on" if actions else "off"
        click.echo(
            f"cronwarden dashboard on http://{host_pattern(host)}:{port}/ (actions {state}; "
            f"serving Host {', '.join(hosts)})"
        )
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        prov.close()


def served_hosts(bind: str, extra: tuple[str, ...]) -> list[str]:
    """The ``Host`` values to serve: ``localhost``, the bind address (unless it is a wildcard
    such as 0.0.0.0, which no client names) and each of ``extra``. Raises a one-line error for
    a value that is no host name (a scheme, a port, a path, or ``*`` alone)."""
    hosts = ["localhost"]
    if bind not in ("0.0.0.0", "::", ""):  # noqa: S104 - compared, not bound
        hosts.append(bind)
    for value in extra:
        name = value.strip().lower()
        if ":" in name and not name.startswith("["):
            # a bare IPv6 address gets its brackets; anything else with a colon is refused below
            with contextlib.suppress(ValueError):
                name = f"[{ipaddress.IPv6Address(name)}]"
        if name == "*":
            raise _Fail("--allowed-host '*' would serve any Host (DNS rebinding): name the hosts")
        if not _HOST.fullmatch(name):
            raise _Fail(
                f"--allowed-host {value!r} is not a host name: give it without scheme, port "
                "or path (like dash.example.com, *.example.com, 10.0.0.5 or [::1])"
            )
        hosts.append(name)
    return list(dict.fromkeys(h if ":" not in h or h.startswith("[") else f"[{h}]" for h in hosts))
