"""A run that breaks its ``Expect`` marks the status suspicious in its completion commit, also
when the engine writes its success window as a maximum (a run claimed within ``lease_margin``
of the next window: every run of an every-minute job, any run late in its window); a later run
that meets the expectation recovers it. On every store (the completion commit is the engine's,
the same for every provider)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cronwarden
from cronwarden import Condition, Engine, EngineSettings, JobSet, RunContext, RunRequest, Watcher
from cronwarden.model.ports import STATUS, Key
from tests.backends import MARKS, STORES
from tests.support.harness import FakeClock, at


@pytest.mark.parametrize("backend", [pytest.param(n, marks=MARKS.get(n, [])) for n in STORES])
def test_every_minute_job_breaking_its_expectation_is_suspicious_then_recovers(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    clock = FakeClock(at("2026-01-20T10:00:05Z"))
    items = {"n": 0}

    def minutely(ctx: RunContext) -> None:
        if items["n"]:
            ctx.count("items_done", items["n"])

    job = cronwarden.job(
        "minutely",
        cron="* * * * *",
        max_runtime="30s",
        owner="team-data",
        expect=cronwarden.Expect(min_items=1),
    )(minutely)
    jobs = JobSet([job])
    with STORES[backend](request, tmp_path) as store:
        engine = Engine(jobs, store, EngineSettings(clock=clock))
        watcher = Watcher(jobs, store, None, notifiers=[], clock=clock, hooks=[])
        engine.execute(RunRequest("minutely", at("2026-01-20T10:00:00Z")))
        status = store.get(Key(STATUS, "minutely"))
        assert status is not None and status.data.get("suspicious"), status
        report = watcher.check()
        (alert,) = [a for a in report.fired if a.kind is Condition.SUSPICIOUS]
        assert "team-data" in alert.text

        items["n"] = 3
        clock.advance(60)
        engine.execute(RunRequest("minutely", at("2026-01-20T10:01:00Z")))
        status = store.get(Key(STATUS, "minutely"))
        assert status is not None and not status.data.get("suspicious"), status
        assert [a.kind for a in watcher.check().recovered] == [Condition.SUSPICIOUS]
