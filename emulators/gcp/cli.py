"""``cronwarden emulators pubsub`` and ``cronwarden emulators firestore``.

Each starts the official emulator on 127.0.0.1, prints the ``export VAR=host:port`` line for
client libraries, and runs until SIGTERM or Ctrl-C, then stops the emulator's process group.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from .emulator import GcpEmulator

# The launchers are imported when a command runs, not here: `--help` prints without the extras.


def _serve(emulator: GcpEmulator) -> None:
    from .._process import EmulatorError

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            emulator.start()
        except EmulatorError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"export {emulator.env_var}={emulator.address}")
        click.echo(
            f"{emulator.which} emulator ready (pid {emulator.pid}); Ctrl-C to stop", err=True
        )
        while not stop.wait(0.5):
            if not emulator.running:
                raise click.ClickException(f"{emulator.which} emulator exited unexpectedly")
    finally:
        emulator.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo(f"{emulator.which} emulator stopped", err=True)


PORT = click.option(
    "--port", type=int, default=0, show_default=True, help="Port on 127.0.0.1 (0 picks a free one)."
)


@click.command("pubsub")
@PORT
def pubsub(port: int) -> None:
    """Run the official Pub/Sub emulator; prints PUBSUB_EMULATOR_HOST."""
    from .emulator import PubSubEmulator

    _serve(PubSubEmulator(port=port))


@click.command("firestore")
@PORT
def firestore(port: int) -> None:
    """Run the official Firestore emulator; prints FIRESTORE_EMULATOR_HOST."""
    from .emulator import FirestoreEmulator

    _serve(FirestoreEmulator(port=port))


commands = [pubsub, firestore]
