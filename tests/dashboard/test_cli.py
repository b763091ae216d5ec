"""``cronwarden dashboard``: refuses actions without a token; serves the page on loopback."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

JOBS = """
from cronwarden import job

@job("nightly", cron="0 2 * * *", max_runtime="5m", owner="team-data")
def nightly(ctx):
    return None
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWARDEN_")}
    env.update(CRONWARDEN_LOCAL_PATH=str(tmp_path / "state.db"), **extra)
    return env


def _cli(tmp_path: Path, *args: str, env: dict[str, str]) -> Any:
    return subprocess.run(
        [sys.executable, "-c", "from cronwarden.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_actions_need_a_token(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(JOBS)
    result = _cli(
        tmp_path, "dashboard", "--jobs", str(tmp_path / "jobs.py"), "--actions", env=_env(tmp_path)
    )
    assert result.returncode == 2
    assert "CRONWARDEN_DASHBOARD_TOKEN" in result.stderr + result.stdout


def _get(port: int, host: str) -> tuple[int, str]:
    """GET / on the loopback port with ``Host: host``: the status and the body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/", headers={"Host": host})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def _serve(tmp_path: Path, *args: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """``cronwarden dashboard`` on a free loopback port, once it answers; the process, the port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from cronwarden.cli import main; main()",
            "dashboard",
            "--jobs",
            str(tmp_path / "jobs.py"),
            "--port",
            str(port),
            *args,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
        try:
            _get(port, "localhost")
            return process, port
        except OSError:
            assert time.monotonic() < deadline, "the dashboard did not answer"
            time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=15)


def test_serves_the_overview_on_loopback(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(JOBS)
    process, port = _serve(tmp_path, "--allowed-host", "dash.example.com", env=_env(tmp_path))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            body = response.read().decode()
        assert "nightly" in body and "team-data" in body
        assert _get(port, f"localhost:{port}")[0] == 200
        assert _get(port, f"dash.example.com:{port}")[0] == 200
        # DNS rebinding: a page on another site, its name pointed at 127.0.0.1
        status, body = _get(port, f"evil.example:{port}")
        assert status == 400 and "nightly" not in body
    finally:
        _stop(process)


def test_allowed_hosts_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(JOBS)
    env = _env(tmp_path, CRONWARDEN_DASHBOARD_ALLOWED_HOSTS="a.example *.b.example")
    process, port = _serve(tmp_path, env=env)
    try:
        assert _get(port, "a.example")[0] == 200
        assert _get(port, "x.b.example")[0] == 200
        assert _get(port, "c.example")[0] == 400
    finally:
        _stop(process)


def test_an_allowed_host_must_be_a_host_name(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(JOBS)
    for value, words in (
        ("*", "any Host"),
        ("http://dash.example.com", "not a host name"),
        ("dash.example.com:8420", "not a host name"),
    ):
        result = _cli(
            tmp_path,
            "dashboard",
            "--jobs",
            str(tmp_path / "jobs.py"),
            "--allowed-host",
            value,
            env=_env(tmp_path),
        )
        assert result.returncode == 2, value
        assert words in result.stderr and "Traceback" not in result.stderr, result.stderr
