"""A live switch between two providers, for the migration tests.

Both sides run the real engine on real stores and queues (SQLite, PostgreSQL, the GCP
emulators) in this process: a :class:`Stepper` thread moves one shared fake clock a minute per
step and has *both* sides' triggers fire their due windows and their workers work their queues,
before, during and after the switch. ``cronwarden migrate`` runs as a subprocess (its own process
group; killed with SIGKILL once per test and run again). Side effects land in the effects
database of ``tests.support.jobs``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cronwarden.hosting.runtime import LocalRunner
from cronwarden.jobs.config import load_jobs
from cronwarden.model.ports import Provider
from cronwarden.run.engine import EngineSettings
from cronwarden.testing import FakeClock

from . import jobs as jobs_module

ROOT = Path(__file__).resolve().parents[2]
JOBS_FILE = str(Path(jobs_module.__file__))


@dataclass
class SideSpec:
    """One provider of a switch: its name, label, the environment that configures it (what
    ``--from-env`` / ``--to-env`` files hold) and how to build it in this process."""

    name: str
    env: dict[str, str]
    build: Callable[[], Provider]
    label: str = ""

    def __post_init__(self) -> None:
        self.label = self.label or self.name

    def env_file(self, folder: Path) -> Path:
        path = folder / f"{self.label}.env"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.env.items()))
        return path


@dataclass
class Side:
    spec: SideSpec
    provider: Provider
    runner: LocalRunner
    active: bool = True


@dataclass
class Stepper:
    """Both sides' triggers and workers, a fake minute per step, on a thread of its own."""

    clock: FakeClock
    sides: list[Side] = field(default_factory=list)
    #: every trigger fires each window twice (a duplicate publish the claim must absorb)
    duplicates: bool = False
    steps: int = 0
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def step(self) -> None:
        with self._lock:
            self.clock.advance(timedelta(minutes=1))
            live = [side for side in self.sides if side.active]
            for side in live:
                for _ in range(2 if self.duplicates else 1):
                    side.runner.fire_due()
            for side in live:
                side.runner.drain(idle=0.2)
            self.steps += 1

    def start(self, every: float = 0.3) -> None:
        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    self.step()
                except BaseException as exc:  # reported by stop()
                    self.errors.append(exc)
                    return

        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="stepper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
            assert not self._thread.is_alive(), "the stepper did not stop"
        if self.errors:
            raise self.errors[0]

    def settle(self, deadline: float = 60.0) -> None:
        """Work both queues (no new windows) until nothing arrives for a while: postponed
        deliveries (a destination still moving in) come back within seconds."""
        end = time.monotonic() + deadline
        quiet = 0
        while quiet < 3:
            assert time.monotonic() < end, "the queues did not settle"
            handled = sum(side.runner.drain(idle=1.0) for side in self.sides if side.active)
            quiet = quiet + 1 if handled == 0 else 0
            if quiet:
                time.sleep(1.0)  # a postponed delivery's delay (5 s) runs out meanwhile


def runner(provider: Provider, clock: FakeClock) -> LocalRunner:
    jobs = load_jobs(JOBS_FILE)
    return LocalRunner(jobs, provider, workers=1, settings=EngineSettings(clock=clock))


def cli_env(effects: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CW_TEST_EFFECTS": str(effects)}
    for name in list(env):
        if name.startswith(("CRONWARDEN_", "FIRESTORE_", "PUBSUB_")):
            env.pop(name)  # each side's settings come from its env file only
    return env


def migrate_argv(src: SideSpec, dst: SideSpec, folder: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from cronwarden.cli import main; main()",
        "migrate",
        "--jobs",
        JOBS_FILE,
        "--from",
        src.name,
        "--to",
        dst.name,
        "--from-env",
        str(src.env_file(folder)),
        "--to-env",
        str(dst.env_file(folder)),
        "--from-label",
        src.label,
        "--to-label",
        dst.label,
        *extra,
    ]


def migrate(
    src: SideSpec, dst: SideSpec, folder: Path, effects: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        migrate_argv(src, dst, folder, *extra),
        env=cli_env(effects),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def migrate_killed(
    src: SideSpec, dst: SideSpec, folder: Path, effects: Path, after_line: str
) -> list[str]:
    """Start a migration and SIGKILL its process group as soon as it printed a line containing
    ``after_line``; the lines it printed."""
    proc = subprocess.Popen(
        migrate_argv(src, dst, folder),
        env=cli_env(effects),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if after_line in line:
                os.killpg(proc.pid, signal.SIGKILL)
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, lines)
    return lines


def effects(path: Path, kind: str) -> list[tuple[str, str, str]]:
    """(item, idempotency key, run id) of every side effect of ``kind``."""
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return [
            (str(r[0]), str(r[1]), str(r[2]))
            for r in db.execute("SELECT item, idem, run_id FROM effects WHERE kind = ?", (kind,))
        ]


def effect_items(path: Path, prefix: str) -> list[str]:
    """Items of effects whose kind starts with ``prefix``, one per effect."""
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return [
            f"{r[0]}|{r[1]}"
            for r in db.execute(
                "SELECT kind, item FROM effects WHERE kind LIKE ?", (prefix.replace("%", "") + "%",)
            )
        ]


def start_clock() -> FakeClock:
    """A fake clock a little ahead of the real one (leases it writes look live to the
    migration, which reads the real clock), on a minute."""
    now = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    return FakeClock(now)


def window_text(when: datetime) -> str:
    from cronwarden.model.runs import format_window

    return format_window(when)


@dataclass
class Switch:
    """What a test built: the clock, the stepper, both sides."""

    clock: FakeClock
    stepper: Stepper
    source: Side
    destination: Side
    folder: Path
    effects: Path
    extra: dict[str, Any] = field(default_factory=dict)


def closing(*providers: Provider) -> Iterator[None]:
    try:
        yield
    finally:
        for provider in providers:
            provider.close()
