"""The local runtime: the scheduler fires due windows in the job's timezone; the runner's
workers execute them; a clock jump fires the latest window only (catch-up does the rest)."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

import pytest

import cronwarden
from cronwarden import EngineSettings, JobSet, LocalRunner
from cronwarden.adapters.local import LocalProvider
from cronwarden.hosting.runtime import Scheduler
from cronwarden.model.ports import RUN
from tests.support.harness import FakeClock, at
from tests.support.procs import poll


def test_scheduler_fires_each_due_window_in_the_jobs_timezone() -> None:
    berlin = cronwarden.job("berlin", cron="0 9 * * *", timezone="Europe/Berlin", max_runtime="1m")(
        lambda ctx: None
    )
    clock = FakeClock(at("2026-03-27T07:59:59Z"))
    ticks: list[tuple[str, datetime]] = []
    stop = threading.Event()
    scheduler = Scheduler(
        JobSet([berlin]), lambda n, w: ticks.append((n, w)), stop, clock=clock, max_sleep=0.02
    )
    scheduler.start()
    try:
        clock.set(at("2026-03-27T08:00:01Z"))  # 09:00 CET
        poll(lambda: len(ticks) == 1, deadline=10, what="first tick")
        clock.set(at("2026-03-30T07:00:05Z"))  # 09:00 CEST after the DST change; 3 days later
        poll(lambda: len(ticks) == 2, deadline=10, what="tick after the jump")
    finally:
        stop.set()
        scheduler.join(5)
    assert ticks == [("berlin", at("2026-03-27T08:00Z")), ("berlin", at("2026-03-30T07:00Z"))]


def test_local_runner_serves_scheduled_windows(tmp_path: Path) -> None:
    done: list[str] = []
    every_minute = cronwarden.job("tick", cron="* * * * *", max_runtime="1m")(
        lambda ctx: done.append(ctx.run_key)
    )
    clock = FakeClock(at("2026-01-20T10:00:30Z"))
    provider = LocalProvider(str(tmp_path / "state.db"))
    runner = LocalRunner(
        JobSet([every_minute]), provider, workers=2, settings=EngineSettings(clock=clock)
    )
    thread = threading.Thread(target=runner.serve, kwargs={"watch_every": None}, daemon=True)
    thread.start()
    try:
        clock.set(at("2026-01-20T10:01:00Z"))
        poll(lambda: done, deadline=20, what="the 10:01 run")
        clock.set(at("2026-01-20T10:02:00Z"))
        poll(lambda: len(done) == 2, deadline=20, what="the 10:02 run")
    finally:
        runner.stop()
        thread.join(10)
    assert done == ["tick:2026-01-20T10:01Z", "tick:2026-01-20T10:02Z"]
    states = [r.data["state"] for r in provider.store().query(RUN, "tick")]
    provider.close()
    assert states == ["succeeded", "succeeded"]


def _hourly() -> cronwarden.Job:
    return cronwarden.job("hourly", cron="0 * * * *", max_runtime="10m")(lambda ctx: None)


def test_every_pull_host_applies_the_visibility_factor_once(tmp_path: Path) -> None:
    """Visibility = lease TTL x (1 + renew_fraction), the same for every pull host. The pull
    workers used to multiply a second time (about 1.78 x TTL): a crashed worker's run was taken
    over a third of a TTL later than necessary."""
    from cronwarden.hosting.pull import PullWorkers

    settings = EngineSettings(renew_fraction=1 / 3)
    jobs = JobSet([_hourly()])
    ttl = (10 + 1) * 60.0  # max runtime + the default lease margin (60 s)
    expected = ttl * (1 + 1 / 3)
    runner = LocalRunner(jobs, LocalProvider(str(tmp_path / "a.db")), settings=settings)
    pull = PullWorkers(jobs, LocalProvider(str(tmp_path / "b.db")), threads=2, settings=settings)
    try:
        assert runner.engine.lease_ttl(jobs["hourly"]).total_seconds() == ttl
        seen = [w.visibility for w in runner.workers + pull.workers]
        assert seen == [pytest.approx(expected)] * 4
    finally:
        runner.provider.close()
        pull.provider.close()


def test_cronwarden_run_gets_the_webhook_notifier_like_the_serverless_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cronwarden.adapters.gcp.functions import FunctionsRuntime
    from cronwarden.watch.notify import LogNotifier, WebhookNotifier

    monkeypatch.setenv("CRONWARDEN_WEBHOOK_URL", "https://hooks.example.invalid/T000/secret")
    jobs = JobSet([_hourly()])
    provider = LocalProvider(str(tmp_path / "state.db"))
    try:
        local = LocalRunner(jobs, provider).watcher.notifiers
        serverless = FunctionsRuntime(jobs, provider=provider).watcher.notifiers
        for notifiers in (local, serverless):
            assert [type(n) for n in notifiers] == [LogNotifier, WebhookNotifier]
            hook = notifiers[1]
            assert isinstance(hook, WebhookNotifier)
            assert hook.url == "https://hooks.example.invalid/T000/secret"
        monkeypatch.delenv("CRONWARDEN_WEBHOOK_URL")
        assert [type(n) for n in LocalRunner(jobs, provider).watcher.notifiers] == [LogNotifier]
    finally:
        provider.close()
