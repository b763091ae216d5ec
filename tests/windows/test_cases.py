"""[windows] Every due window is accounted for: the eight cases of the issue, on the local
provider (SQLite store and queue), with a settable clock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import Alert, Condition, RunContext, RunRequest, Watcher
from cronwarden.adapters.local import SQLiteStore
from cronwarden.cli.windows import (
    WindowActionRefused,
    dead_lettered_windows,
    redrive_window,
    resolve_window,
)
from cronwarden.hosting.trigger import WindowRefused, check_window
from cronwarden.model.errors import CommitConflict
from cronwarden.model.ports import REDRIVE_ATTRIBUTE, RUN, Key
from cronwarden.model.settlement import Action, verdict_for
from cronwarden.run.accounting import WindowStatus, window_states
from cronwarden.run.engine import OutcomeKind
from tests.support.harness import FakeClock, Harness, at, harness

W1, W2, W3 = at("2026-01-20T10:00Z"), at("2026-01-20T10:15Z"), at("2026-01-20T10:30Z")


class Collect:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> None:
        self.alerts.append(alert)


class Holder:
    """Runs one window in a thread and holds its lease (and the job's lock) until released."""

    def __init__(self, h: Harness, request: RunRequest, gate: dict[str, threading.Event]) -> None:
        self.gate = gate
        self.result: dict[str, Any] = {}
        self.thread = threading.Thread(
            target=lambda: self.result.setdefault("outcome", h.engine.execute(request))
        )

    def __enter__(self) -> Holder:
        self.gate["started"].clear()
        self.gate["release"].clear()
        self.gate["hold"].set()
        self.thread.start()
        assert self.gate["started"].wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate["release"].set()
        self.thread.join(10)
        self.gate["hold"].clear()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(at("2026-01-20T10:00:05Z"))


def _quarterly(overlap: str, gate: dict[str, Any], **kw: Any) -> cronwarden.Job:
    def handler(ctx: RunContext) -> None:
        if gate["hold"].is_set():
            gate["started"].set()
            gate["release"].wait(10)
            return
        if gate["fail"]:
            raise ConnectionError("upstream down")

    return cronwarden.job(
        f"q-{overlap}",
        cron="*/15 * * * *",
        max_runtime="10m",
        overlap=overlap,
        retry=cronwarden.Retry(kw.get("attempts", 3), 0, 0),
    )(handler)


@pytest.fixture
def gate() -> dict[str, Any]:
    return {
        "hold": threading.Event(),
        "started": threading.Event(),
        "release": threading.Event(),
        "fail": False,
    }


@pytest.fixture(params=["skip", "fail"])
def h(request: Any, tmp_path: Path, clock: FakeClock, gate: dict[str, Any]) -> Iterator[Harness]:
    made = harness(tmp_path, [_quarterly(request.param, gate)], clock=clock)
    made.job = made.jobs[f"q-{request.param}"]  # type: ignore[attr-defined]
    yield made
    made.close()


def _job(h: Harness) -> cronwarden.Job:
    (job,) = list(h.jobs)
    return job  # type: ignore[no-any-return]


def _states(h: Harness, clock: FakeClock) -> dict[str, str]:
    job = _job(h)
    return {s.window_text: s.state.value for s in window_states(h.store, job, W1, clock(), clock())}


# -- case 1 ------------------------------------------------------------------------------------
def test_1_failed_retry_behind_the_next_windows_lock_waits_and_runs(
    h: Harness, clock: FakeClock, gate: dict[str, Any]
) -> None:
    job = _job(h)
    gate["fail"] = True
    failed = h.engine.execute(RunRequest(job.name, W1))
    assert failed.kind is OutcomeKind.FAILED
    gate["fail"] = False
    clock.set(at("2026-01-20T10:15:05Z"))
    with Holder(h, RunRequest(job.name, W2), gate):
        retry = h.engine.execute(RunRequest(job.name, W1))
        # never skipped / overlap_failed: postponed without using up a delivery attempt
        assert retry.kind is OutcomeKind.DEFERRED, retry
        assert verdict_for(retry).action is Action.POSTPONE
        # a new scheduled fire of another window still gets the declared policy
        fresh = h.engine.execute(RunRequest(job.name, W3))
        expected = (
            OutcomeKind.SKIPPED if job.overlap.value == "skip" else OutcomeKind.OVERLAP_FAILED
        )
        assert fresh.kind is expected
    assert h.engine.execute(RunRequest(job.name, W1)).kind is OutcomeKind.SUCCEEDED
    states = _states(h, clock)
    assert states["2026-01-20T10:00Z"] == "succeeded"
    assert states["2026-01-20T10:15Z"] == "succeeded"


def test_1_a_killed_runs_redelivery_waits_for_the_lock(
    h: Harness, clock: FakeClock, gate: dict[str, Any]
) -> None:
    job = _job(h)
    claimed = h.engine.claim(job, RunRequest(job.name, W1))  # its worker dies: never finishes
    assert not isinstance(claimed, cronwarden.run.engine.Outcome)
    clock.set(at("2026-01-20T10:15:05Z") + timedelta(minutes=11, seconds=10))  # lease ran out
    with Holder(h, RunRequest(job.name, W2), gate):
        redelivery = h.engine.execute(RunRequest(job.name, W1))
        assert redelivery.kind is OutcomeKind.DEFERRED
    assert h.engine.execute(RunRequest(job.name, W1)).kind is OutcomeKind.SUCCEEDED


def test_1_a_lost_retry_is_missed_even_after_the_next_window_succeeded(
    h: Harness, clock: FakeClock, gate: dict[str, Any]
) -> None:
    job = _job(h)
    sink = Collect()
    w = Watcher(h.jobs, h.store, h.queue, notifiers=[sink], clock=clock)
    w.check()
    gate["fail"] = True
    assert h.engine.execute(RunRequest(job.name, W1)).kind is OutcomeKind.FAILED
    gate["fail"] = False
    clock.set(at("2026-01-20T10:15:05Z"))
    assert h.engine.execute(RunRequest(job.name, W2)).kind is OutcomeKind.SUCCEEDED
    assert Condition.MISSED not in {a.kind for a in w.check().active}  # retry still due
    clock.set(at("2026-01-20T10:45:00Z"))  # backoff 0 + max runtime 10m + grace 15m passed
    report = w.check()
    missed = [a for a in report.active if a.kind is Condition.MISSED]
    assert missed and missed[0].extra["window"] == "2026-01-20T10:00Z"
    assert "failed and no retry came" in missed[0].text


# -- case 2 ------------------------------------------------------------------------------------
def test_2_redriven_dead_letters_wait_behind_each_other_and_all_succeed(
    tmp_path: Path, clock: FakeClock, gate: dict[str, Any]
) -> None:
    job = _quarterly("skip", gate, attempts=1)
    h = harness(tmp_path, [job], clock=clock)
    try:
        gate["fail"] = True
        clock.set(at("2026-01-20T10:20Z"))
        for when in (W1, W2):
            assert h.engine.execute(RunRequest(job.name, when)).kind is OutcomeKind.DEAD_LETTERED
        gate["fail"] = False
        for when in (W1, W2):  # the operator redrives both windows from the store
            redrive_window(h.store, h.queue, job, when)
        first = h.queue.receive(2, visibility=60)
        assert {d.attributes[REDRIVE_ATTRIBUTE] for d in first} == {"1"}
        outcomes: dict[str, Any] = {}
        gate["hold"].set()
        t = threading.Thread(target=lambda: outcomes.setdefault("a", h.worker.handle(first[0])))
        t.start()
        assert gate["started"].wait(10)
        outcomes["b"] = h.worker.handle(first[1])  # behind the lock: postponed, re-published
        gate["release"].set()
        t.join(10)
        gate["hold"].clear()
        assert outcomes["a"].kind is OutcomeKind.SUCCEEDED
        assert outcomes["b"].kind is OutcomeKind.DEFERRED
        h.worker.poll(max_messages=5, wait=0)
        states = _states(h, clock)
        assert states["2026-01-20T10:00Z"] == states["2026-01-20T10:15Z"] == "succeeded"
        assert h.queue.dlq_depth() == 0
    finally:
        h.close()


# -- case 3 ------------------------------------------------------------------------------------
def test_3_a_dead_letter_lost_before_the_broker_call_is_dead_lettered_again_and_alerted(
    tmp_path: Path, clock: FakeClock, gate: dict[str, Any]
) -> None:
    job = _quarterly("skip", gate, attempts=1)
    h = harness(tmp_path, [job], clock=clock)
    try:
        w = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock)
        w.check()
        gate["fail"] = True
        h.trigger.publish(RunRequest(job.name, W1))
        (delivery,) = h.queue.receive(1, visibility=60)
        # the worker commits dead_lettered, then dies before the broker's dead-letter call
        decision = h.worker.decide(delivery)
        assert decision.verdict.action is Action.DEAD_LETTER
        h.queue.retry(delivery, delay=0)  # the broker redelivers the unsettled message
        (again,) = h.queue.receive(1, visibility=60)
        outcome = h.worker.handle(again)
        assert outcome is not None and outcome.reason == "AlreadyDeadLettered"
        assert h.queue.dlq_depth() == 1  # in the DLQ now, not acknowledged away
        report = w.check()
        assert any(a.kind is Condition.DEAD_LETTERS and a.job == job.name for a in report.active)
    finally:
        h.close()


def test_3_store_dead_letter_not_in_the_broker_is_listed_alerted_and_redriven_by_window(
    tmp_path: Path, clock: FakeClock, gate: dict[str, Any]
) -> None:
    job = _quarterly("skip", gate, attempts=1)
    h = harness(tmp_path, [job], clock=clock)
    try:
        w = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock)
        w.check()
        gate["fail"] = True
        assert h.engine.execute(RunRequest(job.name, W1)).kind is OutcomeKind.DEAD_LETTERED
        assert h.queue.dlq_depth() == 0  # the broker never got it
        (letter,) = dead_lettered_windows(h.jobs, h.store, h.queue, clock(), horizon=timedelta(1))
        assert letter.window == "2026-01-20T10:00Z" and not letter.in_broker
        assert not w.check().ok
        gate["fail"] = False
        redrive_window(h.store, h.queue, job, W1)
        h.worker.poll(max_messages=1, wait=0)
        assert _states(h, clock)["2026-01-20T10:00Z"] == "succeeded"
        report = w.check()
        assert report.ok, [a.text for a in report.active]
        with pytest.raises(WindowActionRefused):
            redrive_window(h.store, h.queue, job, W1)
    finally:
        h.close()


def test_3_resolve_records_the_reason_and_ends_the_alert(
    tmp_path: Path, clock: FakeClock, gate: dict[str, Any]
) -> None:
    job = _quarterly("skip", gate, attempts=1)
    h = harness(tmp_path, [job], clock=clock)
    try:
        sink = Collect()
        w = Watcher(h.jobs, h.store, h.queue, notifiers=[sink], clock=clock)
        w.check()
        gate["fail"] = True
        h.engine.execute(RunRequest(job.name, W1))
        assert not w.check().ok
        with pytest.raises(WindowActionRefused):
            resolve_window(h.store, job, W1, "  ", actor="ops", now=clock())
        run = resolve_window(h.store, job, W1, "data re-sent by hand", actor="ops", now=clock())
        assert run.excused == "resolved" and "data re-sent by hand (by ops" in str(
            run.excused_detail
        )
        report = w.check()
        assert report.ok and [a.kind for a in report.recovered] == [Condition.DEAD_LETTERS]
        assert _states(h, clock)["2026-01-20T10:00Z"] == "excused"
    finally:
        h.close()


# -- case 4 ------------------------------------------------------------------------------------
def test_4_a_lost_fire_between_two_successes_is_missed(tmp_path: Path, clock: FakeClock) -> None:
    nightly = cronwarden.job("nightly", cron="0 2 * * *", max_runtime="30m")(lambda ctx: None)
    h = harness(tmp_path, [nightly], clock=clock)
    try:
        clock.set(at("2026-01-19T02:00:05Z"))
        w = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock)
        assert h.engine.execute(RunRequest("nightly", at("2026-01-19T02:00Z"))).kind.value == (
            "succeeded"
        )
        assert w.check().ok
        # the 2026-01-20 fire is lost; the 2026-01-21 one runs on time
        clock.set(at("2026-01-21T02:00:05Z"))
        assert h.engine.execute(RunRequest("nightly", at("2026-01-21T02:00Z"))).kind.value == (
            "succeeded"
        )
        report = w.check()  # within one interval (+ max runtime) of the lost window
        (missed,) = [a for a in report.active if a.kind is Condition.MISSED]
        assert missed.extra["window"] == "2026-01-20T02:00Z" and missed.extra["unaccounted"] == 1
        # it stays raised while later nights succeed
        clock.set(at("2026-01-22T02:00:05Z"))
        h.engine.execute(RunRequest("nightly", at("2026-01-22T02:00Z")))
        assert Condition.MISSED in {a.kind for a in w.check().active}
        h.engine.execute(RunRequest("nightly", at("2026-01-20T02:00Z"), reason="backfill"))
        assert w.check().ok
    finally:
        h.close()


def test_4_status_alone_proves_a_healthy_job_without_reading_runs(
    tmp_path: Path, clock: FakeClock
) -> None:
    hourly = cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")(lambda ctx: None)
    h = harness(tmp_path, [hourly], clock=clock)
    try:
        w = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock)
        h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
        w.check()  # first accounting: reads once, sets the checkpoint
        reads: list[str] = []
        h.store.add_observer(lambda rt: reads.append(rt.kind) if rt.operation == "query" else None)
        for hour in range(11, 15):
            clock.set(at(f"2026-01-20T{hour}:00:05Z"))
            h.engine.execute(RunRequest("hourly", at(f"2026-01-20T{hour}:00Z")))
            reads.clear()
            assert w.check().ok
            assert reads.count(RUN) == 0, reads  # one status query, no run read
    finally:
        h.close()


# -- case 5 ------------------------------------------------------------------------------------
def test_5_window_must_be_a_window_and_not_in_the_future(clock: FakeClock) -> None:
    hourly = cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")(lambda ctx: None)
    now = at("2026-01-20T10:30Z")
    assert check_window(hourly, at("2026-01-20T09:00Z"), now) == at("2026-01-20T09:00Z")
    with pytest.raises(WindowRefused, match="in the future"):
        check_window(hourly, at("2030-01-01T00:00Z"), now)
    with pytest.raises(WindowRefused) as refused:
        check_window(hourly, at("2026-01-20T09:07Z"), now)
    text = str(refused.value)
    assert "2026-01-20T09:00Z before" in text and "2026-01-20T10:00Z after" in text
    assert "\n" not in text


# -- case 6 ------------------------------------------------------------------------------------
def test_6_no_missed_during_a_healthy_long_run(tmp_path: Path, clock: FakeClock) -> None:
    long = cronwarden.job("long", cron="0 * * * *", max_runtime="90m")(lambda ctx: None)
    h = harness(tmp_path, [long], clock=clock)
    try:
        w = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock)
        clock.set(at("2026-01-20T09:00:05Z"))
        h.engine.execute(RunRequest("long", at("2026-01-20T09:00Z")))
        w.check()
        clock.set(at("2026-01-20T10:00:05Z"))
        claimed = h.engine.claim(long, RunRequest("long", at("2026-01-20T10:00Z")))
        assert not isinstance(claimed, cronwarden.run.engine.Outcome)
        clock.set(at("2026-01-20T11:01Z"))  # 61 minutes into the run
        report = w.check()
        assert Condition.MISSED not in {a.kind for a in report.active}, report.active
        # the 11:00 window is queued behind it (within its grace): still no missed
        clock.set(at("2026-01-20T11:29Z"))
        assert Condition.MISSED not in {a.kind for a in w.check().active}
    finally:
        h.close()


# -- case 7 ------------------------------------------------------------------------------------
def test_7_concurrent_watchers_notify_a_transition_once(tmp_path: Path, clock: FakeClock) -> None:
    hourly = cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")(lambda ctx: None)
    h = harness(tmp_path, [hourly], clock=clock)
    try:
        Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock).check()
        clock.set(at("2026-01-20T12:00:30Z"))  # 11:00 is now missed
        sinks = [Collect() for _ in range(8)]
        stores = [SQLiteStore(str(tmp_path / "state.db")) for _ in sinks]
        barrier = threading.Barrier(len(sinks))

        def check(i: int) -> None:
            watcher = Watcher(h.jobs, stores[i], None, notifiers=[sinks[i]], clock=clock)
            barrier.wait(10)
            watcher.check()

        threads = [threading.Thread(target=check, args=(i,)) for i in range(len(sinks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        fired = [a for s in sinks for a in s.alerts if a.kind is Condition.MISSED]
        assert len(fired) == 1, fired
        for store in stores:
            store.close()
    finally:
        h.close()


def test_excused_skip_is_recorded_and_not_a_gap(tmp_path: Path, clock: FakeClock) -> None:
    gate = {
        "hold": threading.Event(),
        "started": threading.Event(),
        "release": threading.Event(),
        "fail": False,
    }
    job = _quarterly("skip", gate)
    h = harness(tmp_path, [job], clock=clock)
    try:
        clock.set(at("2026-01-20T10:14:00Z"))
        with Holder(h, RunRequest(job.name, W1), gate):
            clock.set(at("2026-01-20T10:15:05Z"))
            assert h.engine.execute(RunRequest(job.name, W2)).kind is OutcomeKind.SKIPPED
            # a redelivery of the skipped fire is a duplicate, not a second skip
            assert h.engine.execute(RunRequest(job.name, W2)).kind is OutcomeKind.DUPLICATE
        record = h.store.get(Key(RUN, job.name, "2026-01-20T10:15Z"))
        assert record is not None and record.data["excused"] == "overlap_skip"
        clock.set(at("2026-01-20T11:00Z"))
        states = _states(h, clock)
        assert states["2026-01-20T10:15Z"] == WindowStatus.EXCUSED.value
        # a manual run of an excused window may still run it
        assert h.engine.execute(RunRequest(job.name, W2, reason="manual")).kind.value == (
            "succeeded"
        )
    finally:
        h.close()


def test_commit_conflict_is_importable() -> None:  # the CAS loser path uses it
    assert issubclass(CommitConflict, Exception)


def test_without_atomic_increments_a_healthy_job_costs_one_read_per_window(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Table Storage keeps no counters (increments would cost a read per run): its watcher
    proves a healthy job from the status's latest run while only that window is new, reads
    once per new window otherwise, and still finds a gap between two successes."""
    from dataclasses import replace

    from cronwarden.testing import MemoryStore

    store = MemoryStore()
    store.capabilities = replace(store.capabilities, atomic_increment=False, atomic_maximum=False)
    hourly = cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")(lambda ctx: None)
    jobs = cronwarden.JobSet([hourly])
    engine = cronwarden.Engine(jobs, store, cronwarden.EngineSettings(clock=clock))
    w = Watcher(jobs, store, None, notifiers=[], clock=clock)
    engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
    w.check()
    reads: list[str] = []
    store.add_observer(lambda rt: reads.append(rt.kind) if rt.operation == "query" else None)
    for hour in (11, 12, 13):
        clock.set(at(f"2026-01-20T{hour}:00:05Z"))
        engine.execute(RunRequest("hourly", at(f"2026-01-20T{hour}:00Z")))
        for _ in range(3):
            reads.clear()
            assert w.check().ok
        assert reads.count(RUN) <= 1  # the last of three checks needs no read
    status = store.get(Key("status", "hourly"))
    assert status is not None and "windows_recorded" not in status.data
    clock.set(at("2026-01-20T15:00:05Z"))  # the 14:00 fire is lost
    engine.execute(RunRequest("hourly", at("2026-01-20T15:00Z")))
    missed = [a for a in w.check().active if a.kind is Condition.MISSED]
    assert missed and missed[0].extra["window"] == "2026-01-20T14:00Z"
