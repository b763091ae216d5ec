"""Case 5 of issue 13 with real processes: a process stopped (SIGSTOP) inside a write
transaction on the local state file. Every writer on that host then finds the store busy; the
store says so in one line naming the file, the worker backs off and retries the delivery (or,
mid-run, the lease retries the write) instead of failing the run, and everything completes
once the stopped writer resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest
from cronwarden.adapters.local import SQLiteStore
from cronwarden.hosting.trigger import Worker
from cronwarden.jobs import JobSet
from cronwarden.model.errors import StoreUnavailable
from cronwarden.model.ports import Delivery, Key, Merge
from cronwarden.model.settlement import Action
from cronwarden.run.engine import Engine, EngineSettings
from tests.support.harness import at

W = at("2026-01-20T02:00Z")

_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE version_clock SET value = value")
print("holding", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


class StoppedWriter:
    """A real process holding the state file's write lock, stopped with SIGSTOP."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "holding"
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume_and_release(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(str(tmp_path / "state.db"), busy_timeout=0.3)
    yield store
    store.close()


def wait_for(condition: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_stopped_writer_makes_the_worker_back_off_then_the_run_succeeds(
    state: SQLiteStore, tmp_path: Path
) -> None:
    calls: list[str] = []
    job = cronwarden.job("ok", cron="0 * * * *", max_runtime="5m")(
        lambda ctx: calls.append(ctx.run_key)
    )
    engine = Engine(JobSet([job]), state, EngineSettings(store_retry_for=0.5))
    worker = Worker(engine)
    delivery = Delivery("m1", RunRequest("ok", W).to_json(), {}, attempt=1)
    writer = StoppedWriter(tmp_path / "state.db")
    try:
        state.get(Key("run", "ok", "x"))  # readers are not blocked (WAL)
        with pytest.raises(StoreUnavailable) as info:
            state.commit([Merge(Key("status", "ok"), {"a": 1})])
        line = str(info.value)
        assert "\n" not in line and str(tmp_path / "state.db") in line and "busy" in line
        decision = worker.decide(delivery)
        assert decision.verdict.action is Action.RETRY  # backed off, not a failed run
        assert decision.outcome is None and decision.verdict.reason == "StoreUnavailable"
        assert calls == []
    finally:
        writer.resume_and_release()
    decision = worker.decide(delivery)
    assert decision.outcome is not None and decision.outcome.kind is OutcomeKind.SUCCEEDED
    assert calls == ["ok:2026-01-20T02:00Z"]


def test_stopped_writer_mid_run_stalls_the_ledger_commit_not_the_run(
    state: SQLiteStore, tmp_path: Path
) -> None:
    """The run's second batch commit meets the stopped writer: the lease retries it (store
    unavailable, nothing applied) until the writer resumes; every item is done exactly once."""
    effects: Counter[str] = Counter()
    writers: list[StoppedWriter] = []
    leases: list[object] = []

    def fan(ctx: RunContext) -> None:
        leases.append(ctx._lease)
        for item in ctx.items([f"i{n}" for n in range(10)]):
            effects[item.key] += 1
            if item.key == "i4":  # the next batch commit will find the file locked
                writers.append(StoppedWriter(tmp_path / "state.db"))

    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(fan)
    engine = Engine(JobSet([job]), state, EngineSettings(batch_size=5, store_retry_for=60.0))
    result: list[object] = []
    runner = threading.Thread(target=lambda: result.append(engine.execute(RunRequest("fan", W))))
    runner.start()
    try:
        wait_for(lambda: leases and leases[0].retried_unavailable >= 2)  # type: ignore[attr-defined]
        assert runner.is_alive() and effects["i5"] == 0
    finally:
        for writer in writers:
            writer.resume_and_release()
        runner.join(timeout=60)
        for writer in writers:
            writer.kill()
    outcome = result[0]
    assert outcome.kind is OutcomeKind.SUCCEEDED, outcome  # type: ignore[attr-defined]
    assert effects == Counter({f"i{n}": 1 for n in range(10)})


def test_a_killed_writer_releases_the_file_at_once(state: SQLiteStore, tmp_path: Path) -> None:
    """SQLite's locks are the process's: a stopped writer that is killed frees the file."""
    writer = StoppedWriter(tmp_path / "state.db")
    with pytest.raises(StoreUnavailable):
        state.commit([Merge(Key("status", "ok"), {"a": 1})])
    writer.kill()
    assert state.commit([Merge(Key("status", "ok"), {"a": 1})])
