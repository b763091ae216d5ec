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


def port_holder(port: int) -> str | None:
    """Who listens on TCP ``port`` (``pid 123 (java)``), read from /proc; None when nobody
    does or it cannot be told (another user's process, no /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.readlines()[1:]
        except OSError:
            continue
        for row in rows:
            parts = row.split()
            if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{parts[9]}]")
    if not inodes:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                with open(f"/proc/{pid}/comm") as handle:
                    return f"pid {pid} ({handle.read().strip()})"
        except OSError:
            continue
    return "another process"


def ensure_port_free(name: str, port: int, host: str = LOOPBACK) -> None:
    """Refuse to start ``name`` on a port something already listens on: its readiness probe
    would be answered by that other process."""
    if port and port_open(host, port):
        holder = port_holder(port) or "another process"
        raise EmulatorError(
            f"{name}: port {port} on {host} is already taken by {holder}; "
            "stop it or choose another --port (0 picks a free one)"
        )


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
