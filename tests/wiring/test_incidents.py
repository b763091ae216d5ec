"""One incident per problem, on the real SQLite store and queue: a dead-lettered run is one
notification for its job (``dead_letters`` naming ``failing``), the queue-wide alert is only
for letters no job accounts for, and recovery resolves exactly what was opened."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import Alert, Condition, RunContext, Watcher
from cronwarden.ops.windows import redrive_window, resolve_window
from tests.support.harness import FakeClock, Harness, at, harness

W = at("2026-01-20T10:00:00Z")


class Collect:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> None:
        self.alerts.append(alert)

    def told(self) -> list[tuple[str, str, bool, tuple[str, ...]]]:
        return [
            (a.job, a.kind.value, a.firing, tuple(a.extra.get("conditions", ())))
            for a in self.alerts
        ]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(at("2026-01-20T10:00:30Z"))


def _made(tmp_path: Path, clock: FakeClock, attempts: int = 1) -> Harness:
    broken = {"yes": True}

    def hourly(ctx: RunContext) -> None:
        if broken["yes"]:
            raise RuntimeError("upstream refused")

    job = cronwarden.job(
        "hourly",
        cron="0 * * * *",
        max_runtime="10m",
        owner="team-data",
        retry=cronwarden.Retry(attempts, 0, 0),
        liveness=cronwarden.Liveness(failure_threshold=1),
    )(hourly)
    made = harness(tmp_path, [job], clock=clock)
    made.broken = broken  # type: ignore[attr-defined]
    return made


@pytest.fixture
def h(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    made = _made(tmp_path, clock)
    yield made
    made.close()


def _dead_letter_one_run(h: Harness) -> None:
    h.trigger.tick("hourly", W)
    assert h.worker.poll(wait=1.0) == 1
    assert h.queue.dlq_depth() == 1


def _watcher(h: Harness, clock: FakeClock, sink: Collect) -> Watcher:
    return Watcher(h.jobs, h.store, h.queue, notifiers=[sink], clock=clock, hooks=[])


def test_one_dead_lettered_run_is_one_notification(h: Harness, clock: FakeClock) -> None:
    sink = Collect()
    w = _watcher(h, clock, sink)
    _dead_letter_one_run(h)
    report = w.check()
    # before: hourly/dead_letters, hourly/failing and _watcher/dead_letters (three incidents)
    assert sink.told() == [("hourly", "dead_letters", True, ("dead_letters", "failing"))]
    assert "upstream refused" in sink.alerts[0].text and "failing" in sink.alerts[0].text
    assert {a.kind for a in report.active} == {Condition.DEAD_LETTERS, Condition.FAILING}
    assert report.dlq_depth == 1
    assert w.check().fired == [] and len(sink.alerts) == 1


def test_a_letter_no_job_accounts_for_still_raises_the_queue_wide_alert(
    h: Harness, clock: FakeClock
) -> None:
    sink = Collect()
    w = _watcher(h, clock, sink)
    _dead_letter_one_run(h)
    h.queue.publish(b"garbage")  # no job: the worker dead-letters it
    h.worker.poll(wait=1.0)
    w.check()
    told = sink.told()
    assert ("_watcher", "dead_letters", True, ()) in told and len(told) == 2, told
    queue_wide = next(a for a in sink.alerts if a.job == "_watcher")
    assert queue_wide.text.startswith("1 message(s) waiting")


def test_both_ending_together_is_one_recovery(h: Harness, clock: FakeClock) -> None:
    sink = Collect()
    w = _watcher(h, clock, sink)
    _dead_letter_one_run(h)
    w.check()
    h.broken["yes"] = False  # type: ignore[attr-defined]
    h.queue.redrive(10)
    redrive_window(h.store, h.queue, h.jobs["hourly"], W)
    while h.worker.poll(wait=0.5):
        pass
    report = w.check()
    assert [(a.kind, a.firing) for a in report.recovered] == [(Condition.DEAD_LETTERS, False)]
    assert sink.told()[-1] == ("hourly", "dead_letters", False, ("dead_letters", "failing"))
    assert "recovered from dead_letters and failing" in sink.alerts[-1].text
    assert w.check().recovered == [] and len(sink.alerts) == 2


def test_a_failure_that_outlives_its_dead_letters_is_announced_on_its_own(
    h: Harness, clock: FakeClock
) -> None:
    sink = Collect()
    w = _watcher(h, clock, sink)
    _dead_letter_one_run(h)
    w.check()
    job = h.jobs["hourly"]
    resolve_window(h.store, job, W, "known outage", actor="ops", now=clock())
    assert h.queue.dlq_depth() == 1  # the broker keeps its letter
    report = w.check()
    # the dead-letter incident ends; failing goes on and was never opened on its own: now it
    # is; the letter the store no longer accounts for is the queue's (never hidden)
    assert [(a.job, a.kind, a.firing) for a in report.recovered] == [
        ("hourly", Condition.DEAD_LETTERS, False)
    ]
    assert [(a.job, a.kind, a.firing) for a in report.fired] == [
        ("hourly", Condition.FAILING, True),
        ("_watcher", Condition.DEAD_LETTERS, True),
    ]
    h.broken["yes"] = False  # type: ignore[attr-defined]
    clock.advance(3600)
    h.trigger.tick("hourly", at("2026-01-20T11:00:00Z"))
    h.worker.poll(wait=1.0)
    last = w.check()
    assert [(a.kind, a.firing) for a in last.recovered] == [(Condition.FAILING, False)]


def test_a_failure_opened_first_keeps_its_own_incident(tmp_path: Path, clock: FakeClock) -> None:
    """``failing`` that fired before any window dead-lettered is its own incident: it is
    resolved on its own when it ends, while the dead letters stay open."""
    h = _made(tmp_path, clock, attempts=2)
    sink = Collect()
    w = _watcher(h, clock, sink)
    h.trigger.tick("hourly", W)
    h.worker.poll(wait=1.0)  # attempt 1 failed, a retry is due
    assert [a.kind for a in w.check().fired] == [Condition.FAILING]
    h.worker.poll(wait=1.0)  # attempt 2: dead-lettered
    assert [a.kind for a in w.check().fired] == [Condition.DEAD_LETTERS]
    h.broken["yes"] = False  # type: ignore[attr-defined]
    clock.advance(3600)
    h.trigger.tick("hourly", at("2026-01-20T11:00:00Z"))
    h.worker.poll(wait=1.0)
    report = w.check()
    assert [(a.kind, a.firing) for a in report.recovered] == [(Condition.FAILING, False)]
    assert Condition.DEAD_LETTERS in {a.kind for a in report.active}
    h.close()


def test_a_letter_of_a_window_beyond_the_horizon_is_the_queues(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The job no longer accounts for a window older than the watcher's horizon: its letter
    raises the queue-wide alert instead of going unannounced."""
    h = _made(tmp_path, clock)
    try:
        _dead_letter_one_run(h)
        clock.advance(40 * 24 * 3600)
        w = Watcher(
            h.jobs,
            h.store,
            h.queue,
            notifiers=[],
            clock=clock,
            hooks=[],
            horizon=timedelta(days=30),
        )
        report = w.check()
        assert "_watcher" in {a.job for a in report.fired}, report.fired
    finally:
        h.close()
