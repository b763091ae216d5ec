"""``cronwarden emulators servicebus``: run the Service Bus emulator in the foreground.

Prints one ready line on stdout (with the connection string to use) once both the AMQP port and
the admin API listen; exits 0 on SIGTERM/SIGINT after closing client connections. Binds
127.0.0.1 unless ``--allow-non-loopback`` is given with another ``--host``.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import sys
import threading
from types import FrameType

import click

# Only the standard library's modules here: the server needs python-qpid-proton (the [emulators]
# extra) and is imported when the command runs, so `--help` prints without it.
from .auth import DEFAULT_KEY, DEFAULT_KEY_NAME


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command(name="servicebus")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config.json in the official emulator's shape (default: a few built-in queues).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", type=int, default=5672, show_default=True, help="AMQP port (0: any).")
@click.option(
    "--admin-port", type=int, default=0, show_default=True, help="Admin HTTP port (0: any)."
)
@click.option(
    "--allow-non-loopback", is_flag=True, help="Allow binding an interface other than loopback."
)
@click.option(
    "--max-message-size",
    type=int,
    default=None,
    help="Largest message accepted, in bytes (default: the emulator's own limit).",
)
@click.option(
    "--key-name",
    default=DEFAULT_KEY_NAME,
    show_default=True,
    help="Shared access key name that SAS tokens must name (skn).",
)
@click.option(
    "--key",
    default=DEFAULT_KEY,
    show_default=True,
    envvar="CRONWARDEN_SERVICEBUS_KEY",
    show_envvar=True,
    help="Shared access key that SAS tokens must be signed with.",
)
@click.option(
    "--accept-any-key", is_flag=True, help="Accept any token on $cbs (no SAS signature checks)."
)
@click.option("--verbose", "-v", is_flag=True, help="Log links and errors to stderr.")
def servicebus(
    config_path: str | None,
    host: str,
    port: int,
    admin_port: int,
    allow_non_loopback: bool,
    max_message_size: int | None,
    key_name: str,
    key: str,
    accept_any_key: bool,
    verbose: bool,
) -> None:
    """Run the cronwarden Service Bus emulator (AMQP 1.0, in memory)."""
    from .._process import port_holder as _port_holder
    from .._process import port_open as _port_open
    from .admin import AdminServer
    from .auth import SasValidator
    from .config import ConfigError, load_config
    from .server import DEFAULT_MAX_MESSAGE_SIZE, EmulatorServer, connection_string

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # proton logs every client that hangs up without closing as an error; that is normal here.
    logging.getLogger("proton").setLevel(logging.INFO if verbose else logging.CRITICAL)
    if not _is_loopback(host) and not allow_non_loopback:
        raise click.UsageError(f"refusing to bind {host}: pass --allow-non-loopback to do so")
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    for warning in config.warnings:
        click.echo(f"warning: {warning}", err=True)

    sas = SasValidator(keys={key_name: key}, accept_any=accept_any_key)
    server = EmulatorServer(
        config,
        host=host,
        port=port,
        max_message_size=DEFAULT_MAX_MESSAGE_SIZE if max_message_size is None else max_message_size,
        sas=sas,
    )
    for wanted in (port, admin_port):
        if wanted and _port_open(host, wanted):
            holder = _port_holder(wanted) or "another process"
            raise click.ClickException(
                f"port {wanted} on {host} is already taken by {holder}; "
                "stop it or choose another --port (0 picks a free one)"
            )
    try:
        server.start()
        admin = AdminServer(server, host, admin_port).start()
    except OSError as exc:
        server.stop()
        raise click.ClickException(f"cannot listen on {host}: {exc.strerror or exc}") from exc

    done = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    queues = ",".join(q.name for q in config.queues.values())
    click.echo(
        f"servicebus emulator ready: amqp={host}:{server.port} admin={admin.url} "
        f"queues={queues} connection_string={connection_string(host, server.port, key_name, key)}"
    )
    conn = connection_string(host, server.port, key_name, key)
    click.echo(f"export CRONWARDEN_SERVICEBUS_CONNECTION='{conn}'")
    sys.stdout.flush()
    while not done.wait(0.5):
        pass
    admin.stop()
    server.stop()


def main() -> None:
    """Entry point for ``python -m cronwarden.emulators.servicebus``."""
    servicebus(prog_name="python -m cronwarden.emulators.servicebus")


commands = [servicebus]
