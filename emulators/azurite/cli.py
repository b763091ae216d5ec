"""``cronwarden emulators azurite``: install the pinned Azurite, or run it in the foreground."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click


@click.command(name="azurite")
@click.option("--port", type=int, default=None, help="Table service port (default: a free one).")
@click.option("--blob/--no-blob", default=False, help="Also start the Blob service.")
@click.option("--blob-port", type=int, default=None, help="Blob service port (implies --blob).")
@click.option(
    "--install",
    "install_only",
    is_flag=True,
    help="Only install the pinned Azurite (npm ci into the cache) and exit.",
)
def azurite(port: int | None, blob: bool, blob_port: int | None, install_only: bool) -> None:
    """Run Azurite in memory on 127.0.0.1 until interrupted; prints the connection string.

    The connection string carries Azurite's public development key, which only works against
    the emulator.
    """
    # Imported here, not at module level: `--help` prints without the extras.
    from cronwarden.emulators._process import EmulatorError

    from .install import AzuriteInstallError, ensure_installed, pinned_version
    from .launcher import Azurite

    try:
        folder = ensure_installed()
    except AzuriteInstallError as exc:
        raise click.ClickException(str(exc)) from exc
    if install_only:
        click.echo(f"azurite {pinned_version()} installed in {folder}")
        return
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        emulator = Azurite(port=port, blob=blob, blob_port=blob_port).start()
    except EmulatorError as exc:
        signal.signal(signal.SIGTERM, previous)
        raise click.ClickException(str(exc)) from exc
    with emulator:
        click.echo(
            f"azurite {pinned_version()} table on {emulator.table_endpoint}"
            + (f", blob on {emulator.blob_endpoint}" if emulator.blob_endpoint else "")
        )
        # Quoted (the string holds ';'), then exported: both lines paste into a shell as they are.
        click.echo(f"AZURE_STORAGE_CONNECTION_STRING='{emulator.connection_string}'")
        click.echo("export AZURE_STORAGE_CONNECTION_STRING")
        click.echo("Ctrl-C to stop.", err=True)
        try:
            while not stop.wait(0.5):
                if not emulator.alive():
                    raise click.ClickException("Azurite exited unexpectedly")
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)


commands = [azurite]
