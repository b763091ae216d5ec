"""Helpers for tests that run the real ``cronwarden`` command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "nightly_export.py")


def cronwarden_argv() -> list[str]:
    exe = Path(sys.executable).with_name("cronwarden")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from cronwarden.cli import main; main()"]


def environment(tmp_path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWARDEN_")}
    env.update({"COLUMNS": "200", "CRONWARDEN_LOCAL_PATH": str(tmp_path / "state.db")})
    env.update(extra or {})
    return env


class Result:
    def __init__(self, done: subprocess.CompletedProcess[str]) -> None:
        self.code = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr

    @property
    def out(self) -> str:
        """The first line of stdout."""
        return (self.stdout.splitlines() or [""])[0]

    @property
    def err(self) -> str:
        """The first stderr line that is not a JSON log line."""
        lines = [line for line in self.stderr.splitlines() if not line.startswith("{")]
        return (lines or [""])[0]

    def __repr__(self) -> str:
        return f"rc={self.code}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr[-3000:]}"


@pytest.fixture
def cw(tmp_path: Path):  # type: ignore[no-untyped-def]
    def run(*args: str, env: dict[str, str] | None = None, argv: list[str] | None = None) -> Result:
        done = subprocess.run(
            [*(argv or cronwarden_argv()), *args],
            capture_output=True,
            text=True,
            env=environment(tmp_path, env),
            cwd=tmp_path,
            timeout=120,
        )
        return Result(done)

    return run


def write_jobs(path: Path, body: str) -> str:
    path.write_text("import os, time, cronwarden\n" + body)
    return str(path)
