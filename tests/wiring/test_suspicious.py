"""A run that breaks its ``Expect`` marks the status suspicious in its completion commit, also
when the engine writes its success window as a maximum (a run claimed within ``lease_margin``
of the next window: every run of an every-minute job, any run late in its window); a later run
that meets the expectation recovers it."""

from __future__ import annotations

from pathlib import Path

import cronwarden
from cronwarden import Condition, RunContext, RunRequest, Watcher
from cronwarden.model.ports import STATUS, Key
from tests.support.harness import FakeClock, at, harness


def test_every_minute_job_breaking_its_expectation_is_suspicious_then_recovers(
    tmp_path: Path,
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
    h = harness(tmp_path, [job], clock=clock)
    try:
        watcher = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock, hooks=[])
        h.engine.execute(RunRequest("minutely", at("2026-01-20T10:00:00Z")))
        status = h.store.get(Key(STATUS, "minutely"))
        assert status is not None and status.data.get("suspicious"), status
        report = watcher.check()
        (alert,) = [a for a in report.fired if a.kind is Condition.SUSPICIOUS]
        assert "team-data" in alert.text

        items["n"] = 3
        clock.advance(60)
        h.engine.execute(RunRequest("minutely", at("2026-01-20T10:01:00Z")))
        status = h.store.get(Key(STATUS, "minutely"))
        assert status is not None and not status.data.get("suspicious"), status
        assert [a.kind for a in watcher.check().recovered] == [Condition.SUSPICIOUS]
    finally:
        h.close()
