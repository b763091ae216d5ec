"""[windows] Cases 1-3 on every store (SQLite, Firestore emulator, Azurite Table Storage,
PostgreSQL, memory): the engine and worker on the real store, a MemoryQueue on the same fake
clock as the broker. Table Storage keeps no accounting counters (increments would cost a read
per run): its watcher reads the run records instead, and must raise the same alerts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import Condition, Engine, EngineSettings, JobSet, RunRequest, Trigger, Watcher
from cronwarden.cli.windows import redrive_window
from cronwarden.hosting.trigger import Worker
from cronwarden.model.ports import Store
from cronwarden.model.settlement import Action, verdict_for
from cronwarden.run.accounting import WindowStatus, window_states
from cronwarden.run.engine import OutcomeKind
from cronwarden.testing import FakeClock, MemoryQueue
from tests.backends import MARKS, STORES

W1, W2 = "2026-01-20T10:00Z", "2026-01-20T10:15Z"


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in STORES])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with STORES[request.param](request, tmp_path) as made:
        yield made


class World:
    def __init__(self, store: Store, attempts: int) -> None:
        self.clock = FakeClock("2026-01-20T10:00:05Z")
        self.fail = False

        def handler(ctx: Any) -> None:
            if self.fail:
                raise ConnectionError("upstream down")

        self.job = cronwarden.job(
            "w",
            cron="*/15 * * * *",
            max_runtime="10m",
            overlap="skip",
            retry=cronwarden.Retry(attempts, 0, 0),
        )(handler)
        self.jobs = JobSet([self.job])
        self.store = store
        self.queue = MemoryQueue(clock=self.clock)
        self.engine = Engine(self.jobs, store, EngineSettings(clock=self.clock))
        self.trigger = Trigger(self.jobs, self.queue, store)
        self.worker = Worker(self.engine, self.queue)
        self.watcher = Watcher(self.jobs, store, self.queue, notifiers=[], clock=self.clock)

    def request(self, window: str, reason: str = "schedule") -> RunRequest:
        return RunRequest("w", cronwarden.model.parse_window(window), reason=reason)

    def states(self) -> dict[str, str]:
        now = self.clock()
        start = cronwarden.model.parse_window(W1)
        return {
            s.window_text: s.state.value
            for s in window_states(self.store, self.job, start, now, now)
        }


def test_case_1_retry_behind_the_next_windows_lock_waits(store: Store) -> None:
    w = World(store, attempts=3)
    w.fail = True
    assert w.engine.execute(w.request(W1)).kind is OutcomeKind.FAILED
    w.fail = False
    w.clock.set("2026-01-20T10:15:05Z")
    held = w.engine.claim(w.job, w.request(W2))  # W2 holds the lock
    assert not isinstance(held, cronwarden.run.engine.Outcome)
    retry = w.engine.execute(w.request(W1))
    assert retry.kind is OutcomeKind.DEFERRED and verdict_for(retry).action is Action.POSTPONE
    held.lease.finish(
        held.run.with_(state=cronwarden.model.RunState.SUCCEEDED),
        cronwarden.model.ports.Merge(
            cronwarden.model.records.status_key_of("w"), {"status": "succeeded"}
        ),
    )
    assert w.engine.execute(w.request(W1)).kind is OutcomeKind.SUCCEEDED
    assert w.states()[W1] == WindowStatus.SUCCEEDED.value


def test_case_2_redriven_dead_letters_are_not_skipped(store: Store) -> None:
    w = World(store, attempts=1)
    w.watcher.check()
    w.fail = True
    w.clock.set("2026-01-20T10:20Z")
    for window in (W1, W2):
        assert w.engine.execute(w.request(window)).kind is OutcomeKind.DEAD_LETTERED
    report = w.watcher.check()
    assert any(a.kind is Condition.DEAD_LETTERS and a.job == "w" for a in report.active)
    w.fail = False
    held = w.engine.claim(w.job, w.request(W1, "redrive"), redrive=1)
    assert not isinstance(held, cronwarden.run.engine.Outcome)
    second = w.engine.execute(w.request(W2, "redrive"), redrive=1)
    assert second.kind is OutcomeKind.DEFERRED  # waits for the lock; never skipped
    held.lease.finish(
        held.run.with_(state=cronwarden.model.RunState.SUCCEEDED),
        cronwarden.model.ports.Merge(
            cronwarden.model.records.status_key_of("w"), {"status": "succeeded"}
        ),
    )
    assert w.engine.execute(w.request(W2, "redrive"), redrive=1).kind is OutcomeKind.SUCCEEDED
    assert w.states()[W2] == WindowStatus.SUCCEEDED.value


def test_case_3_lost_dead_letter_is_dead_lettered_again_alerted_and_redriven(
    store: Store,
) -> None:
    w = World(store, attempts=1)
    w.watcher.check()
    w.fail = True
    w.trigger.publish(w.request(W1))
    (delivery,) = w.queue.receive(1, visibility=60)
    assert w.worker.decide(delivery).verdict.action is Action.DEAD_LETTER  # then the worker dies
    w.clock.advance(61)
    (again,) = w.queue.receive(1, visibility=60)
    outcome = w.worker.handle(again)
    assert outcome is not None and outcome.reason == "AlreadyDeadLettered"
    assert w.queue.dlq_depth() == 1
    assert any(a.kind is Condition.DEAD_LETTERS for a in w.watcher.check().active)
    w.fail = False
    w.queue.redrive(10)  # or by window, whether or not the broker has it:
    redrive_window(store, w.queue, w.job, cronwarden.model.parse_window(W1))
    while w.worker.poll(max_messages=5, wait=0):
        pass
    assert w.states()[W1] == WindowStatus.SUCCEEDED.value
    w.clock.advance(timedelta(minutes=1))
    report = w.watcher.check()
    assert report.ok, [a.text for a in report.active]
