"""``cronwarden emulators up gcp|azure`` / ``down``: every emulator a provider needs, at once.

``up KIND`` starts them on free 127.0.0.1 ports and prints ready-to-paste ``export`` lines
(the provider and its connection settings) only once every emulator answers; it runs in the
foreground until SIGTERM / Ctrl-C. ``up KIND --detach`` starts that in the background, waits
until it is ready, prints the same lines and returns, so ``eval "$(cronwarden emulators up gcp
--detach)"`` sets up a shell; ``down`` stops what ``--detach`` started (by its process group).
Files of a detached stack: ``.cronwarden/emulators-KIND.{pid,env,log}`` in the current folder.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import click

KINDS = ("gcp", "azure")
GCP_PROJECT = "demo-cronwarden"  #: any id works on the emulators; "demo-" ones never reach GCP
_FOLDER = Path(".cronwarden")


def _start_gcp() -> tuple[dict[str, str], Callable[[], None]]:
    from .gcp.emulator import FirestoreEmulator, PubSubEmulator

    pubsub = PubSubEmulator().start()
    try:
        firestore = FirestoreEmulator().start()
    except BaseException:
        pubsub.stop()
        raise

    def stop() -> None:
        firestore.stop()
        pubsub.stop()

    env = {
        "CRONWARDEN_PROVIDER": "gcp",
        "CRONWARDEN_GCP_PROJECT": GCP_PROJECT,
        pubsub.env_var: pubsub.address,
        firestore.env_var: firestore.address,
    }
    return env, stop


def _start_azure() -> tuple[dict[str, str], Callable[[], None]]:
    from .azurite.launcher import Azurite
    from .servicebus.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, SasValidator
    from .servicebus.config import default_config
    from .servicebus.server import EmulatorServer, connection_string

    azurite = Azurite().start()
    try:
        sas = SasValidator(keys={DEFAULT_KEY_NAME: DEFAULT_KEY})
        server = EmulatorServer(default_config(), host="127.0.0.1", port=0, sas=sas).start()
    except BaseException:
        azurite.stop()
        raise

    def stop() -> None:
        server.stop()
        azurite.stop()

    env = {
        "CRONWARDEN_PROVIDER": "azure",
        "AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string,
        "CRONWARDEN_SERVICEBUS_CONNECTION": connection_string(
            "127.0.0.1", server.port, DEFAULT_KEY_NAME, DEFAULT_KEY
        ),
    }
    return env, stop


def export_lines(env: dict[str, str]) -> str:
    """``export NAME='value'`` lines a POSIX shell reads back as they are."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())


def _files(kind: str) -> dict[str, Path]:
    return {suffix: _FOLDER / f"emulators-{kind}.{suffix}" for suffix in ("pid", "env", "log")}


@click.command("up")
@click.argument("kind", type=click.Choice(KINDS))
@click.option("--detach", is_flag=True, help="Run in the background; print the exports; return.")
@click.option("--env-file", type=click.Path(dir_okay=False), help="Also write the exports here.")
def up(kind: str, detach: bool, env_file: str | None) -> None:
    """Start every emulator provider KIND needs; print `export` lines once all answer."""
    if detach:
        _detach(kind)
        return
    from ._process import EmulatorError

    stop_event = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop_event.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        env, stop = (_start_gcp if kind == "gcp" else _start_azure)()
    except EmulatorError as exc:
        raise click.ClickException(str(exc).splitlines()[0]) from exc
    try:
        text = export_lines(env)
        if env_file:
            partial = Path(env_file + ".partial")
            partial.write_text(text)
            partial.replace(env_file)  # appears whole, only once everything answers
        click.echo(text, nl=False)
        sys.stdout.flush()
        click.echo(f"{kind} emulators ready; Ctrl-C to stop", err=True)
        stop_event.wait()
    finally:
        stop()
    click.echo(f"{kind} emulators stopped", err=True)


def _detach(kind: str) -> None:
    files = _files(kind)
    _FOLDER.mkdir(exist_ok=True)
    if files["pid"].exists():
        raise click.ClickException(
            f"{kind} emulators already started from here (pid file {files['pid']}); "
            "`cronwarden emulators down` first"
        )
    files["env"].unlink(missing_ok=True)
    argv = [sys.executable, "-c", "from cronwarden.cli import main; main()"]
    with open(files["log"], "wb") as log:
        child = subprocess.Popen(
            [*argv, "emulators", "up", kind, "--env-file", str(files["env"])],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    files["pid"].write_text(str(child.pid))
    end = time.monotonic() + 180
    while not files["env"].exists():
        if child.poll() is not None or time.monotonic() > end:
            _stop_group(child.pid)
            files["pid"].unlink(missing_ok=True)
            tail = files["log"].read_text(errors="replace").strip().splitlines()[-1:]
            raise click.ClickException(
                f"{kind} emulators did not start: {tail[0] if tail else 'no output'} "
                f"(log: {files['log']})"
            )
        time.sleep(0.2)
    click.echo(files["env"].read_text(), nl=False)


def _stop_group(pid: int, grace: float = 30.0) -> bool:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return True
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return False


@click.command("down")
def down() -> None:
    """Stop the emulators `up --detach` started from this folder."""
    stopped = []
    for kind in KINDS:
        files = _files(kind)
        if not files["pid"].exists():
            continue
        _stop_group(int(files["pid"].read_text().strip()))
        for path in files.values():
            path.unlink(missing_ok=True)
        stopped.append(kind)
    if not stopped:
        raise click.ClickException(f"no detached emulators started from here ({_FOLDER}/)")
    click.echo(f"stopped: {', '.join(stopped)} emulators")


commands = [up, down]
