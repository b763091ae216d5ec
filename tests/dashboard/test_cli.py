"""``cronwarden dashboard``: refuses actions without a token; serves the page on loopback."""

from __future__ import annotations

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


def test_serves_the_overview_on_loopback(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(JOBS)
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
        ],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline, body = time.monotonic() + 30, ""
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    body = response.read().decode()
                    break
            except OSError:
                time.sleep(0.1)
        assert "nightly" in body and "team-data" in body
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
