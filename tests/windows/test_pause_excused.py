"""[ops] and [windows]: a scheduled fire of a paused job is an excused window, not a run and not a
gap; a manual trigger still runs; after `resume` fires are enqueued again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import cronwarden
from cronwarden import JobSet, RunContext, Trigger
from cronwarden.model import RunState, format_window
from cronwarden.pause import pause, resume
from cronwarden.ports import RUN, Key
from cronwarden.records import RunRecord
from cronwarden.testing import MemoryQueue, MemoryStore


def _jobs() -> JobSet:
    @cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")
    def hourly(ctx: RunContext) -> None:
        return None

    return JobSet([hourly])


def test_a_paused_jobs_scheduled_fire_is_excused_not_enqueued() -> None:
    jobs, store, queue = _jobs(), MemoryStore(), MemoryQueue()
    now = datetime.now(UTC)
    job = jobs["hourly"]
    window = job.schedule.floor(now)
    pause(store, "hourly", reason="supplier maintenance", by="ops", now=now - timedelta(hours=2))

    assert Trigger(jobs, queue, store).tick("hourly", now) == []
    assert queue.receive(10) == [], "a paused job's fire must not be enqueued"
    record = store.get(Key(RUN, "hourly", format_window(window)))
    assert record is not None
    run = RunRecord.from_data(record.data)
    assert run.state is RunState.EXCUSED and run.excused == "paused"
    assert "supplier maintenance" in (run.excused_detail or "")

    report = cronwarden.Watcher(jobs, store, None, notifiers=[]).check()
    assert not report.active, [a.text for a in report.active]

    # a manual run of a paused job is an operator's decision: it is enqueued
    assert len(Trigger(jobs, queue, store).tick("hourly", now, reason="manual")) == 1

    resume(store, "hourly", by="ops", now=now)
    later = window + timedelta(hours=1)
    requests = Trigger(jobs, queue, store).tick("hourly", later)
    assert [r.window for r in requests] == [later]
