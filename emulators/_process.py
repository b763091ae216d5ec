"""Starting and stopping emulator processes: free loopback ports, readiness, process groups.

Every emulator we launch runs in its own process group (``start_new_session``), so stopping it
kills the launcher *and* whatever it spawned (Java, node) by group id, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def http_ok(url: str, *, expect: int | None = None, timeout: float = 1.0) -> bool:
    """True when ``url`` answers over HTTP (any status, or exactly ``expect``)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:  # noqa: S310 - loopback
            return expect is None or reply.status == expect
    except urllib.error.HTTPError as exc:
        return expect is None or exc.code == expect
    except (OSError, ValueError):
        return False


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class EmulatorError(RuntimeError):
    """An emulator failed to start or died; the message carries the tail of its output."""


@dataclass
class ManagedProcess:
    """One emulator process in its own process group, with its output in a log file."""

    name: str
    argv: Sequence[str]
    log_path: str
    env: Mapping[str, str] | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> ManagedProcess:
        env = dict(os.environ)
        env.update(self.env or {})
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child, closed below
        try:
            self.process = subprocess.Popen(
                list(self.argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        finally:
            log.close()
        return self

    @property
    def pid(self) -> int:
        if self.process is None:
            raise EmulatorError(f"{self.name} was not started")
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as handle:
                return "".join(handle.readlines()[-lines:])
        except OSError:
            return ""

    def wait_ready(self, ready: Callable[[], bool], *, deadline: float = 60.0) -> None:
        """Poll ``ready`` until true; fail fast if the process exits, or at the deadline."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if not self.alive():
                raise EmulatorError(f"{self.name} exited during start:\n{self.log_tail()}")
            if ready():
                return
            time.sleep(0.1)
        self.stop()
        raise EmulatorError(f"{self.name} not ready after {deadline:.0f}s:\n{self.log_tail()}")

    def stop(self, *, grace: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds."""
        if self.process is None:
            return
        pgid = self.process.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace)
        # The launcher may have exited while children of its group linger (gcloud → java).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace)
        self.process = None
