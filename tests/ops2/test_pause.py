"""Pause, resume and snooze: stored in the status record with who, when and why; the watcher
stays quiet about missed windows of a paused job (and after the resume, about those that fell
due during the pause); a snooze mutes notifications and announces what still fires after it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import cronwarden
from cronwarden import Alert, JobSet, RunContext, RunRequest, Watcher
from cronwarden.adapters.local import LocalProvider
from cronwarden.cli import cli
from cronwarden.jobs.pause import active_pause, pause, resume, snooze
from cronwarden.model.ports import STATUS, Key
from tests.support.harness import FakeClock

HOUR = timedelta(hours=1)


class Sink:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> None:
        self.alerts.append(alert)

    def kinds(self) -> list[str]:
        return [f"{a.kind.value}:{'fired' if a.firing else 'recovered'}" for a in self.alerts]


def _job() -> cronwarden.Job:
    def hourly(ctx: RunContext) -> None:
        if ctx.payload.get("fail"):
            raise RuntimeError("boom")

    return cronwarden.job(
        "hourly",
        cron="0 * * * *",
        max_runtime="10m",
        retry=cronwarden.Retry(1, 0, 0),
        liveness=cronwarden.Liveness(failure_threshold=1),
    )(hourly)


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    made = LocalProvider(str(tmp_path / "state.db"))
    yield made
    made.close()


def test_paused_job_is_not_missed_during_or_after_the_pause(
    provider: LocalProvider, clock: FakeClock
) -> None:
    jobs = JobSet([_job()])
    store = provider.store()
    sink = Sink()
    watcher = Watcher(jobs, store, None, notifiers=[sink], clock=clock, hooks=[])
    engine = cronwarden.Engine(jobs, store, cronwarden.EngineSettings(clock=clock))
    engine.execute(RunRequest("hourly", jobs["hourly"].schedule.floor(clock())))
    watcher.check()

    pause(store, "hourly", reason="vendor maintenance", by="ana@ops", now=clock())
    record = store.get(Key(STATUS, "hourly"))
    assert record is not None and record.data["pause"]["by"] == "ana@ops"
    assert active_pause(record.data, clock()) is not None
    clock.advance(5 * HOUR)
    report = watcher.check()
    assert "missed" not in {a.kind.value for a in report.active}
    assert "vendor maintenance" in report.jobs[0].state_text

    resume(store, "hourly", by="ana@ops", now=clock())
    assert "missed" not in {a.kind.value for a in watcher.check().active}  # due in the pause
    clock.advance(2 * HOUR)  # a window after the resume goes unrun: that one is missed
    assert "missed" in {a.kind.value for a in watcher.check().active}
    assert sink.kinds() == ["missed:fired"]


def test_a_pause_does_not_hide_failures(provider: LocalProvider, clock: FakeClock) -> None:
    """A paused job's scheduled fires do not run (tests/ops2/test_pause_fires.py); a run by
    hand does, and its failure alerts."""
    jobs = JobSet([_job()])
    store = provider.store()
    watcher = Watcher(jobs, store, None, notifiers=[], clock=clock, hooks=[])
    pause(store, "hourly", reason="x", by="b", now=clock())
    engine = cronwarden.Engine(jobs, store, cronwarden.EngineSettings(clock=clock))
    engine.execute(
        RunRequest(
            "hourly", jobs["hourly"].schedule.floor(clock()), payload={"fail": 1}, reason="manual"
        )
    )
    assert "failing" in {a.kind.value for a in watcher.check().active}


def test_snooze_mutes_and_then_announces_what_still_fires(
    provider: LocalProvider, clock: FakeClock
) -> None:
    jobs = JobSet([_job()])
    store = provider.store()
    sink = Sink()
    watcher = Watcher(jobs, store, None, notifiers=[sink], clock=clock, hooks=[])
    engine = cronwarden.Engine(jobs, store, cronwarden.EngineSettings(clock=clock))
    snooze(store, "hourly", until=clock() + 3 * HOUR, by="b", now=clock(), reason="deploy")
    engine.execute(
        RunRequest("hourly", jobs["hourly"].schedule.floor(clock()), payload={"fail": 1})
    )
    report = watcher.check()
    assert "failing" in {a.kind.value for a in report.active}  # still evaluated
    assert sink.alerts == []  # but nobody was told
    record = store.get(Key(STATUS, "hourly"))
    # held back: the failure, and the window it dead-lettered ([windows]' per-job alert)
    assert record is not None and "failing" in record.data["snoozed_alerts"]
    clock.advance(4 * HOUR)
    watcher.check()

    # failing and the window it dead-lettered: one notification naming both (one incident)
    def failing() -> list[Alert]:
        return [a for a in sink.alerts if "failing" in a.extra.get("conditions", [a.kind])]

    announced = failing()
    assert len(announced) == 1 and announced[0].text.startswith("still firing after snooze")
    watcher.check()
    assert len(failing()) == 1  # once


def test_cli_pause_resume_snooze(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "pause_jobs.py"
    module.write_text(
        "import cronwarden\n"
        "@cronwarden.job('hourly', cron='0 * * * *', max_runtime='10m')\n"
        "def hourly(ctx):\n    pass\n"
    )
    monkeypatch.setenv("CRONWARDEN_LOCAL_PATH", str(tmp_path / "cli.db"))
    base = ["--jobs", str(module)]
    out = CliRunner().invoke(
        cli, ["pause", *base, "--reason", "migration", "--until", "8h", "hourly"]
    )
    assert out.exit_code == 0, out.output
    assert "paused by" in out.output and "migration" in out.output
    missing = CliRunner().invoke(cli, ["pause", *base, "hourly"])
    assert missing.exit_code != 0 and "--reason" in missing.output
    out = CliRunner().invoke(cli, ["resume", *base, "--by", "ana", "hourly"])
    assert out.exit_code == 0 and "resumed" in out.output, out.output
    out = CliRunner().invoke(cli, ["snooze", *base, "--until", "2h", "hourly"])
    assert out.exit_code == 0 and "snoozed until" in out.output, out.output
    made = LocalProvider(str(tmp_path / "cli.db"))
    try:
        record = made.store().get(Key(STATUS, "hourly"))
    finally:
        made.close()
    assert record is not None
    actions = [entry["action"] for entry in record.data["pause_log"]]
    assert actions == ["pause", "resume", "snooze"]
    assert record.data["pause"] is None and record.data["snooze"]["until"]
