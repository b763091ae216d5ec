"""``cronwarden emulators postgres``: a throwaway PostgreSQL server in the foreground."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click


@click.command(name="postgres")
def postgres() -> None:
    """Run a private PostgreSQL server (the installed binaries, a temporary data directory, a
    free 127.0.0.1 port, trust authentication) until interrupted; prints its DSN. Its data is
    removed when it stops."""
    # Imported here, not at module level: `--help` prints without the extras.
    from cronwarden.emulators._process import EmulatorError

    from .launcher import PostgresServer, missing_reason

    reason = missing_reason()
    if reason:
        raise click.ClickException(reason)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        server = PostgresServer().start()
    except EmulatorError as exc:
        signal.signal(signal.SIGTERM, previous)
        raise click.ClickException(str(exc)) from exc
    try:
        click.echo(f"CRONWARDEN_POSTGRES_DSN={server.dsn}")
        click.echo(f"postmaster pid {server.pid}; Ctrl-C stops it", err=True)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)


commands = [postgres]
