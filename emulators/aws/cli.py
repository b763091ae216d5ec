"""``cronwarden emulators aws``: a moto server in the foreground, with ready-to-paste exports."""

from __future__ import annotations

import importlib.util
import signal
import threading
from types import FrameType

import click


@click.command(name="aws")
@click.option("--port", type=int, default=None, help="Port (default: a free one).")
def aws(port: int | None) -> None:
    """Run a moto server on 127.0.0.1 until interrupted; prints the exports to use it.

    The credentials printed are moto's placeholders; they work against the emulator only.
    """
    # Imported here, not at module level: `--help` prints without the [emulators] extra.
    from cronwarden.emulators._process import EmulatorError

    from .launcher import MotoServer

    # moto runs in a child process: without this check its traceback would be the only message.
    missing = [name for name in ("moto", "flask") if importlib.util.find_spec(name) is None]
    if missing:
        raise click.ClickException(
            f"`cronwarden emulators aws` needs the [emulators] extra ({', '.join(missing)}): "
            "pip install 'cronwarden[emulators]'"
        )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        server = MotoServer(port=port).start()
    except EmulatorError as exc:
        signal.signal(signal.SIGTERM, previous)
        raise click.ClickException(str(exc)) from exc
    with server:
        click.echo(f"moto on {server.endpoint}")
        for name, value in {
            **server.env(),
            "CRONWARDEN_PROVIDER": "aws",
            "CRONWARDEN_AWS_CREATE_MISSING": "true",
        }.items():
            click.echo(f"export {name}={value}")
        click.echo("Ctrl-C to stop.", err=True)
        try:
            while not stop.wait(0.5):
                if not server.alive():
                    raise click.ClickException("moto exited unexpectedly")
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)


commands = [aws]
