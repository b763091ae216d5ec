"""A private PostgreSQL server that a test may restart: stopped by its postmaster's pid (fast
shutdown: every backend is terminated with ``57P01``, every pooled connection goes stale) and
started again on the same data directory and port."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from cronwarden.emulators.postgres import PostgresServer


def restart(server: PostgresServer, *, timeout: float = 60.0) -> None:
    """Fast shutdown by pid, then ``pg_ctl start`` on the same data directory (its
    ``postmaster.opts`` keeps the port and settings); ``server.pid`` follows the new postmaster."""
    old = server.pid
    os.kill(old, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while _alive(old):
        assert time.monotonic() < deadline, "the server did not stop"
        time.sleep(0.02)
    argv = [
        os.path.join(server.bindir, "pg_ctl"),
        "-D",
        server.data_dir,
        "-l",
        server.log_path,
        "-o",
        _options(server),
        "-w",
        "-t",
        str(int(timeout)),
        "start",
    ]
    if os.geteuid() == 0:
        argv = ["runuser", "-u", server.user, "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 10)
    assert done.returncode == 0, f"pg_ctl start failed: {done.stdout}{done.stderr}"
    with open(os.path.join(server.data_dir, "postmaster.pid")) as handle:
        server.pid = int(handle.readline().strip())


def _options(server: PostgresServer) -> str:
    return " ".join(
        [
            f"-c listen_addresses={server.host}",
            f"-p {server.port}",
            f"-k {server.directory}",
            *(f"-c {k}={v}" for k, v in server.settings.items()),
        ]
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
