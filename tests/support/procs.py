"""Starting worker subprocesses for tests and reading what they did."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Proc:
    popen: subprocess.Popen[str]

    def result(self, timeout: float = 60) -> dict[str, Any]:
        out, err = self.popen.communicate(timeout=timeout)
        self.stderr = err
        lines = [line for line in out.splitlines() if line.startswith("{")]
        assert lines, f"worker printed no outcome (rc={self.popen.returncode}):\n{err[-3000:]}"
        return dict(json.loads(lines[-1]))

    def logs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stderr.splitlines() if line.startswith("{")]

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)


def start_worker(
    db: Path,
    effects: Path,
    job: str,
    window: str,
    *,
    env: dict[str, str] | None = None,
    lease_margin: float = 60.0,
    go_file: Path | None = None,
) -> Proc:
    argv = [
        sys.executable,
        "-m",
        "tests.support.worker",
        "--db",
        str(db),
        "--job",
        job,
        "--window",
        window,
        "--lease-margin",
        str(lease_margin),
    ]
    if go_file is not None:
        argv += ["--go-file", str(go_file)]
    full_env = {**os.environ, "CW_TEST_EFFECTS": str(effects), **(env or {})}
    popen = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return Proc(popen)


@contextlib.contextmanager
def reaping(procs: list[Proc]) -> Iterator[list[Proc]]:
    """Kill every started worker's process group on the way out, whatever happened."""
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.popen.poll() is None:
                proc.signal(signal.SIGCONT)
                proc.signal(signal.SIGKILL)
                proc.popen.wait(timeout=10)


def effects(path: Path, kind: str | None = None) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=30) as db:
        db.row_factory = sqlite3.Row
        try:
            rows = db.execute("SELECT * FROM effects ORDER BY at").fetchall()
        except sqlite3.OperationalError:
            return []
    return [dict(r) for r in rows if kind is None or r["kind"] == kind]


def poll(predicate: Callable[[], Any], *, deadline: float = 30.0, what: str = "condition") -> Any:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} not reached within {deadline}s")
