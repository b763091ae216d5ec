"""A run's completion claims the next window of its job in the same commit when the worker holds
that window's delivery (:mod:`cronwarden.run.handover`): one commit per run, and nothing that
either half promises changes when the combined commit is refused, fails or is not followed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cronwarden
from cronwarden import Engine, JobSet, OutcomeKind, RunContext, RunRequest, Trigger, Worker
from cronwarden.model.ports import LOCK, RUN, STATUS, Key, Merge, Op, apply_merge, check_merge
from cronwarden.run.handover import compose
from cronwarden.testing import Fault, FaultyStore, MemoryQueue, MemoryStore
from cronwarden.testing.faults import UNAVAILABLE, UNKNOWN
from tests.support.harness import at

W0 = at("2026-01-20T02:00Z")
JOB = "hourly"


def _windows(n: int) -> list[Any]:
    return [W0 + timedelta(hours=i) for i in range(n)]


def _setup(store: Any, calls: list[str], fail_on: str = "") -> tuple[Engine, Trigger, Worker]:
    def handler(ctx: RunContext) -> None:
        calls.append(ctx.run_key)
        if fail_on and ctx.run_key.endswith(fail_on):
            raise RuntimeError("boom")

    jobs = JobSet([cronwarden.job(JOB, cron="0 * * * *", max_runtime="5m")(handler)])
    queue = MemoryQueue()
    engine = Engine(jobs, store)
    return engine, Trigger(jobs, queue), Worker(engine, queue)


def _handovers(ops: Sequence[Op]) -> bool:
    """A commit that completes one run and claims another (two run records)."""
    return sum(1 for op in ops if op.key.kind == RUN) == 2


def _state(store: Any, window: Any) -> dict[str, Any]:
    record = store.get(Key(RUN, JOB, f"{window:%Y-%m-%dT%H:%M}Z"))
    assert record is not None
    return dict(record.data)


def test_a_batch_of_windows_costs_one_commit_per_run_and_runs_each_once() -> None:
    store, calls = MemoryStore(), []
    _engine, trigger, worker = _setup(store, calls)
    windows = _windows(5)
    for window in windows:
        trigger.tick(JOB, window)
    before = store.round_trips
    assert worker.poll(max_messages=10, wait=0) == 5
    assert calls == [f"{JOB}:{w:%Y-%m-%dT%H:%M}Z" for w in windows]
    assert store.round_trips - before == 6  # one claim, then one commit per run
    for window in windows:
        run = _state(store, window)
        assert (run["state"], run["attempt"], run["fence"]) == ("succeeded", 1, 1)
    assert store.get(Key(LOCK, JOB)) is None
    status = store.get(Key(STATUS, JOB))
    assert status is not None
    assert status.data["status"] == "succeeded"
    assert status.data["windows_recorded"] == 5 and status.data["windows_open"] == 0
    assert status.data["run_key"] == f"{JOB}:{windows[-1]:%Y-%m-%dT%H:%M}Z"
    assert worker.queue.pending() == 0


def test_the_same_records_as_one_by_one() -> None:
    """Run records (but their ids and times), lock and status as a worker taking one delivery
    at a time leaves them."""
    results = []
    for batch in (1, 10):
        store: MemoryStore = MemoryStore()
        _engine, trigger, worker = _setup(store, [])
        for window in _windows(4):
            trigger.tick(JOB, window)
        while worker.poll(max_messages=batch, wait=0):
            pass
        status = store.get(Key(STATUS, JOB))
        assert status is not None
        volatile = {"run_id", "owner", "started_at", "finished_at", "last_success_at", "write_id"}
        volatile |= {"lease_expires", "first_started_at", "expire_at", "duration_ms", "due_at"}
        volatile |= {"duration_baseline", "baseline_updated_at"}
        runs = [
            {k: v for k, v in _state(store, w).items() if k not in volatile} for w in _windows(4)
        ]
        results.append(
            (runs, {k: v for k, v in status.data.items() if k not in volatile and "_at" not in k})
        )
    assert results[0] == results[1]


def test_a_next_window_already_run_is_a_duplicate_and_this_run_completes_alone() -> None:
    store, calls = MemoryStore(), []
    engine, trigger, worker = _setup(store, calls)
    first, second = _windows(2)
    assert engine.execute(RunRequest(JOB, second)).kind is OutcomeKind.SUCCEEDED
    trigger.tick(JOB, first)
    trigger.tick(JOB, second)  # a duplicate delivery of a finished window
    assert worker.poll(max_messages=10, wait=0) == 2
    assert calls == [f"{JOB}:{second:%Y-%m-%dT%H:%M}Z", f"{JOB}:{first:%Y-%m-%dT%H:%M}Z"]
    assert _state(store, first)["state"] == "succeeded"
    assert store.get(Key(LOCK, JOB)) is None
    assert worker.queue.pending() == 0


def test_a_failed_run_hands_nothing_over() -> None:
    store, calls = MemoryStore(), []
    first, second = _windows(2)
    _engine, trigger, worker = _setup(store, calls, fail_on=f"{first:%H:%M}Z")
    trigger.tick(JOB, first)
    trigger.tick(JOB, second)
    assert worker.poll(max_messages=10, wait=0) == 2
    assert _state(store, first)["state"] == "failed"
    assert _state(store, second)["state"] == "succeeded"
    assert store.get(Key(LOCK, JOB)) is None


def _three_windows_with(fault: Fault) -> tuple[FaultyStore, list[str]]:
    """Three windows of the job in one poll, ``fault`` injected on the combined commit."""
    store = FaultyStore(MemoryStore(), [fault])
    calls: list[str] = []
    _engine, trigger, worker = _setup(store, calls)
    for window in _windows(3):
        trigger.tick(JOB, window)
    assert worker.poll(max_messages=10, wait=0) == 3
    return store, calls


def _all_succeeded_once(store: FaultyStore) -> None:
    for window in _windows(3):
        run = _state(store, window)
        assert (run["state"], run["attempt"]) == ("succeeded", 1)
    assert store.get(Key(LOCK, JOB)) is None


@pytest.mark.parametrize("outcome", [UNAVAILABLE, UNKNOWN])
def test_a_combined_commit_not_applied_falls_back_to_the_usual_two(outcome: str) -> None:
    store, calls = _three_windows_with(Fault(outcome, match=lambda op, ops: _handovers(ops)))
    assert store.injected == [("commit", outcome, False)]
    assert len(calls) == 3
    _all_succeeded_once(store)


def test_a_combined_commit_whose_answer_was_lost_is_read_back_and_used() -> None:
    fault = Fault(UNKNOWN, after=True, match=lambda op, ops: _handovers(ops))
    store, calls = _three_windows_with(fault)
    assert store.injected == [("commit", UNKNOWN, True)]
    assert len(calls) == 3  # nothing ran twice
    _all_succeeded_once(store)


def test_a_handed_claim_not_executed_is_given_back_and_its_window_runs_once() -> None:
    store, calls = MemoryStore(), []
    engine, _trigger, _worker = _setup(store, calls)
    first, second, third = _windows(3)
    assert engine.execute(RunRequest(JOB, first), then=RunRequest(JOB, second)).kind is (
        OutcomeKind.SUCCEEDED
    )
    held = store.get(Key(LOCK, JOB))
    assert held is not None and held.data["run_key"].endswith(f"{second:%H:%M}Z")
    # the caller executes another window instead: the claim is given back, the lock freed
    assert engine.execute(RunRequest(JOB, third)).kind is OutcomeKind.SUCCEEDED
    assert _state(store, third)["state"] == "succeeded"
    assert engine.execute(RunRequest(JOB, second)).kind is OutcomeKind.SUCCEEDED  # taken over
    assert _state(store, second)["state"] == "succeeded"
    assert [c[-6:] for c in calls] == [f"{w:%H:%M}Z" for w in (first, third, second)]


def test_a_batch_that_breaks_off_gives_its_handed_claim_back() -> None:
    store, calls = MemoryStore(), []
    engine, trigger, worker = _setup(store, calls)
    first, second = _windows(2)
    trigger.tick(JOB, first)
    trigger.tick(JOB, second)
    queue = worker.queue
    settled: list[str] = []

    def broken_ack(delivery: Any) -> None:
        settled.append(delivery.message_id)
        raise KeyboardInterrupt  # the worker is stopped while it settles the first

    queue.ack = broken_ack  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        worker.poll(max_messages=10, wait=0)
    assert len(settled) == 1 and len(calls) == 1
    assert store.get(Key(LOCK, JOB)) is None  # given back: other windows are not held back
    run = _state(store, second)
    assert run["state"] == "running"
    (again,) = queue.receive(10, visibility=5.0)  # its delivery is visible again at once
    assert RunRequest.from_json(again.body).run_key == f"{JOB}:{second:%Y-%m-%dT%H:%M}Z"
    assert engine.execute(RunRequest(JOB, second)).kind is OutcomeKind.SUCCEEDED  # at once
    assert _state(store, second)["attempt"] == 2 and len(calls) == 2


_fields = st.dictionaries(st.sampled_from("abcdef"), st.none() | st.integers(-3, 3), max_size=3)


@st.composite
def _merges(draw: st.DrawFn) -> Merge:
    names = draw(st.lists(st.sampled_from("abcdef"), unique=True, max_size=6))
    groups = [draw(st.integers(0, 2)) for _ in names]
    ints = st.integers(-50, 50)
    return Merge(
        Key(STATUS, JOB),
        {n: draw(st.none() | ints) for n, g in zip(names, groups, strict=True) if g == 0},
        {n: draw(ints) for n, g in zip(names, groups, strict=True) if g == 1},
        {n: draw(ints) for n, g in zip(names, groups, strict=True) if g == 2},
    )


@given(base=st.none() | _fields, first=_merges(), then=_merges())
def test_compose_leaves_what_the_two_merges_leave(
    base: dict[str, Any] | None, first: Merge, then: Merge
) -> None:
    both = compose(first, then)
    if both is None:  # only when a field is set or raised by one and counted by the other
        assert any(
            name in then.increments or name in then.maximums
            for name in (*first.fields, *first.increments, *first.maximums)
            if name not in then.fields
        )
        return
    check_merge(both)
    assert apply_merge(base, both) == apply_merge(apply_merge(base, first), then)


def test_a_drain_stopped_mid_batch_still_runs_the_window_it_claimed(tmp_path: Any) -> None:
    """``run --once``'s loop: a stop while a run executes gives the batch's later deliveries
    back, except the one whose claim that run's completion made: it runs."""
    from cronwarden.adapters.local import LocalProvider
    from cronwarden.hosting.runtime import LocalRunner

    calls: list[str] = []
    box: dict[str, LocalRunner] = {}

    def handler(ctx: RunContext) -> None:
        calls.append(ctx.run_key)
        box["runner"].stop_event.set()  # stopping while the first run executes

    jobs = JobSet([cronwarden.job(JOB, cron="0 * * * *", max_runtime="5m")(handler)])
    provider = LocalProvider(str(tmp_path / "state.db"))
    runner = box["runner"] = LocalRunner(jobs, provider, workers=1)
    try:
        windows = _windows(3)
        for window in windows:
            runner.trigger.tick(JOB, window)
        assert runner.drain(idle=0.2) == 2
        assert [c[-6:] for c in calls] == [f"{w:%H:%M}Z" for w in windows[:2]]
        store = runner.store
        assert store.get(Key(LOCK, JOB)) is None
        assert _state(store, windows[1])["state"] == "succeeded"
        assert store.get(Key(RUN, JOB, f"{windows[2]:%Y-%m-%dT%H:%M}Z")) is None
        assert runner.queue.receive(10, visibility=5.0)  # the third, given back
    finally:
        provider.close()
