"""[ops] A paused job's scheduled fires do not run: their windows are recorded excused (reason
``paused``) on every store, runs by hand still go through, a run already holding the lock when
the pause came finishes normally and hands the lock to the pause, and the resume (or the pause's
end) lets the next fire run."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import Engine, EngineSettings, JobSet, RunRequest
from cronwarden.jobs.pause import pause, resume
from cronwarden.model import RunState, format_window, parse_window
from cronwarden.model.ports import Store
from cronwarden.model.records import RunRecord, lock_key_of, run_key_of
from cronwarden.run.engine import OutcomeKind
from cronwarden.testing import FakeClock
from tests.backends import MARKS, STORES

W1, W2, W3 = "2026-01-20T10:00Z", "2026-01-20T10:15Z", "2026-01-20T10:30Z"


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in STORES])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with STORES[request.param](request, tmp_path) as made:
        yield made


class World:
    def __init__(self, store: Store) -> None:
        self.clock = FakeClock("2026-01-20T10:00:05Z")
        self.ran: list[str] = []
        self.gate: threading.Event | None = None
        self.inside = threading.Event()

        def handler(ctx: Any) -> None:
            self.inside.set()
            if self.gate is not None:
                assert self.gate.wait(30), "the test never opened the gate"
                ctx.save_checkpoint({"after": "pause"})  # a fenced write after the pause
            self.ran.append(format_window(ctx.window))

        self.job = cronwarden.job("p", cron="*/15 * * * *", max_runtime="10m")(handler)
        self.store = store
        self.engine = Engine(JobSet([self.job]), store, EngineSettings(clock=self.clock))

    def run(self, window: str, reason: str = "schedule") -> OutcomeKind:
        request = RunRequest("p", parse_window(window), reason=reason)
        return self.engine.execute(request).kind

    def record(self, window: str) -> RunRecord:
        stored = self.store.get(run_key_of("p", window))
        assert stored is not None, window
        return RunRecord.from_data(stored.data)


def test_scheduled_fires_of_a_paused_job_are_excused_and_runs_by_hand_go_through(
    store: Store,
) -> None:
    w = World(store)
    assert w.run(W1) is OutcomeKind.SUCCEEDED
    pause(store, "p", reason="vendor outage", by="ana@ops", now=w.clock())

    w.clock.advance(timedelta(minutes=15))
    assert w.run(W2) is OutcomeKind.SKIPPED
    excused = w.record(W2)
    assert excused.state is RunState.EXCUSED and excused.excused == "paused"
    assert "vendor outage" in (excused.excused_detail or "")
    assert w.run(W2) is OutcomeKind.DUPLICATE  # a redelivery of the excused fire

    w.clock.advance(timedelta(minutes=15))
    assert w.run(W3, reason="manual") is OutcomeKind.SUCCEEDED  # by hand: through the pause
    assert w.ran == [W1, W3]
    lock = store.get(lock_key_of("p"))
    assert lock is not None and lock.data["owner"] == "paused"  # the pause holds it again

    resume(store, "p", by="ana@ops", now=w.clock())
    assert store.get(lock_key_of("p")) is None
    w.clock.advance(timedelta(minutes=15))
    assert w.run("2026-01-20T10:45Z") is OutcomeKind.SUCCEEDED
    assert w.ran == [W1, W3, "2026-01-20T10:45Z"]


def test_a_pause_ends_on_its_own_at_until(store: Store) -> None:
    w = World(store)
    pause(store, "p", reason="x", by="b", now=w.clock(), until=w.clock() + timedelta(minutes=20))
    assert w.run(W1) is OutcomeKind.SKIPPED
    w.clock.advance(timedelta(minutes=30))
    assert w.run(W3) is OutcomeKind.SUCCEEDED  # the pause's lock ran out with it
    assert w.ran == [W3]


def test_a_run_holding_the_lock_finishes_and_hands_the_lock_to_the_pause(store: Store) -> None:
    w = World(store)
    w.gate = threading.Event()
    outcome: list[OutcomeKind] = []
    runner = threading.Thread(target=lambda: outcome.append(w.run(W1)))
    runner.start()
    try:
        assert w.inside.wait(30)
        pause(store, "p", reason="freeze", by="b", now=w.clock())
    finally:
        w.gate.set()
        runner.join(30)
    assert outcome == [OutcomeKind.SUCCEEDED]  # not fenced out by the pause
    assert w.record(W1).state is RunState.SUCCEEDED
    lock = store.get(lock_key_of("p"))
    assert lock is not None and lock.data["owner"] == "paused"

    w.gate = None
    w.clock.advance(timedelta(minutes=15))
    assert w.run(W2) is OutcomeKind.SKIPPED
    assert w.record(W2).excused == "paused"
    assert w.ran == [W1]


def test_cli_run_once_of_a_paused_job_excuses_its_window_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from click.testing import CliRunner

    from cronwarden.cli import cli

    module = tmp_path / "paused_jobs.py"
    module.write_text(
        "import cronwarden\n"
        "@cronwarden.job('hourly', cron='0 * * * *', max_runtime='10m')\n"
        "def hourly(ctx):\n    raise SystemExit('a paused job ran')\n"
    )
    monkeypatch.setenv("CRONWARDEN_LOCAL_PATH", str(tmp_path / "cli.db"))
    jobs = ["--jobs", str(module)]
    paused = CliRunner().invoke(cli, ["pause", *jobs, "--reason", "vendor outage", "hourly"])
    assert paused.exit_code == 0, paused.output
    ran = CliRunner().invoke(cli, ["run", *jobs, "--once", "-o", "json"])
    assert ran.exit_code == 0, ran.output
    lines = [json.loads(line) for line in ran.output.splitlines() if line.startswith("{")]
    (verdict,) = [line for line in lines if "result" in line]
    assert verdict["message"] == "ok: 1 run(s): 1 skipped", verdict
    shown = CliRunner().invoke(cli, ["history", *jobs, "hourly", "-o", "json"])
    rows = [json.loads(line) for line in shown.output.splitlines() if line.startswith("{")]
    (row,) = [r for r in rows if "window" in r]
    assert row["state"] == "excused" and row["excused"] == "paused"
    assert "vendor outage" in row["error"]
    late = CliRunner().invoke(
        cli, ["pause", *jobs, "--reason", "x", "--until", "2020-01-01", "hourly"]
    )
    assert late.exit_code == 2 and "must end in the future" in late.output


def test_a_paused_dependent_job_excuses_its_upstreams_wake_up(tmp_path: Path) -> None:
    from cronwarden.adapters.local import LocalProvider

    ran: list[str] = []
    a = cronwarden.job("a", cron="0 * * * *", max_runtime="10m")(lambda ctx: None)
    b = cronwarden.job("b", after="a", max_runtime="10m")(lambda ctx: ran.append("b"))
    provider = LocalProvider(str(tmp_path / "state.db"))
    try:
        store = provider.store()
        clock = FakeClock("2026-01-20T10:00:05Z")
        engine = Engine(JobSet([a, b]), store, EngineSettings(clock=clock))
        pause(store, "b", reason="downstream frozen", by="ana", now=clock())
        wake = RunRequest("b", parse_window(W1), reason="after:a")
        assert engine.execute(wake).kind is OutcomeKind.SKIPPED
        stored = store.get(run_key_of("b", W1))
        assert stored is not None and RunRecord.from_data(stored.data).excused == "paused"
        assert engine.execute(wake).kind is OutcomeKind.DUPLICATE  # the sweep's second copy
        assert ran == []
    finally:
        provider.close()
