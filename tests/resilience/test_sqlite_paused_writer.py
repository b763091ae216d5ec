"""SQLite, a paused writer: a real second process SIGSTOPped while it holds the write lock of the
state file (or the queue file). Every other process's operation reports
:class:`StoreUnavailable` (one line naming the file, nothing applied) after the busy timeout,
never a raw ``sqlite3.OperationalError``; a run retries it and completes once the writer
resumes."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

import cronwarden
from cronwarden import Engine, EngineSettings, JobSet, RunContext, Trigger, Worker
from cronwarden.adapters.local import SQLiteQueue, SQLiteStore
from cronwarden.model.errors import StoreUnavailable
from cronwarden.model.ports import RUN, Create, Key
from cronwarden.model.records import RunRecord
from cronwarden.model.runs import RunState
from cronwarden.testing import capture_events
from tests.support.harness import at

from .paused import paused_writer

pytestmark = pytest.mark.slow
W = at("2026-01-20T02:00Z")
BUSY = 0.3  #: seconds a statement waits for the paused writer's lock


def _unavailable(call: object, path: Path) -> StoreUnavailable:
    with pytest.raises(StoreUnavailable) as caught:
        call()  # type: ignore[operator]
    text = str(caught.value)
    assert str(path) in text and "\n" not in text
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    return caught.value


def test_store_and_queue_report_unavailable_while_a_writer_is_paused(tmp_path: Path) -> None:
    state, queue_file = tmp_path / "state.db", tmp_path / "queue.db"
    store = SQLiteStore(str(state), busy_timeout=BUSY)
    queue = SQLiteQueue(str(queue_file), busy_timeout=BUSY)
    queue.publish(b"first")
    (held,) = queue.receive(visibility=60)
    try:
        with paused_writer(str(state)):
            _unavailable(lambda: store.commit([Create(Key(RUN, "j", "a"), {})]), state)
            _unavailable(lambda: SQLiteStore(str(state), busy_timeout=BUSY), state)
            assert store.get(Key(RUN, "j", "a")) is None  # WAL: readers are not blocked
        with paused_writer(str(queue_file)):
            _unavailable(lambda: queue.publish(b"second"), queue_file)
            _unavailable(lambda: queue.receive(visibility=60), queue_file)
            _unavailable(lambda: queue.retry(held, 0.0), queue_file)
            _unavailable(lambda: queue.ack(held), queue_file)
            _unavailable(lambda: queue.dead_letter(held, "Test"), queue_file)
            _unavailable(lambda: queue.redrive(), queue_file)
            _unavailable(lambda: SQLiteQueue(str(queue_file), busy_timeout=BUSY), queue_file)
            assert queue.dlq_depth() == 0
        # nothing was applied while locked; everything works once the writer resumed
        assert store.commit([Create(Key(RUN, "j", "a"), {})]) != []
        queue.ack(held)
        assert queue.receive(visibility=60) == []
    finally:
        store.close()
        queue.close()


def test_a_run_retries_through_a_paused_writer_and_completes_once(tmp_path: Path) -> None:
    """The claim meets the locked state file: the delivery is put back for a retry (no raw
    error reaches the worker loop); a run whose last commit meets it retries that commit; an
    acknowledgement that meets a locked queue file is sent again. Every window completes once
    the writer resumes, exactly once."""
    calls: list[str] = []
    started = {hour: threading.Event() for hour in ("03", "04")}
    release = {hour: threading.Event() for hour in ("03", "04")}

    def handler(ctx: RunContext) -> None:
        calls.append(ctx.run_key)
        hour = ctx.run_key[-6:-4]
        if hour in started:
            started[hour].set()
            assert release[hour].wait(30)

    job = cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")(handler)
    jobs = JobSet([job])
    state, queue_file = tmp_path / "state.db", tmp_path / "queue.db"
    store = SQLiteStore(str(state), busy_timeout=BUSY)
    queue = SQLiteQueue(str(queue_file), busy_timeout=BUSY)
    engine = Engine(jobs, store, EngineSettings(store_retry_for=30.0))
    worker, trigger = Worker(engine, queue), Trigger(jobs, queue)
    try:
        # 1. the claim meets the lock: the delivery is retried, nothing raised
        trigger.tick("hourly", W)
        with paused_writer(str(state)), capture_events() as events:
            assert worker.poll(wait=5) == 1
        errors = [e for e in events if e["event"] == "worker.error"]
        assert errors and errors[0]["error_type"] == "StoreUnavailable", events
        assert calls == []
        _poll_until(lambda: worker.poll(wait=0.5) > 0 and bool(calls), 15)
        assert _attempts(store, "2026-01-20T02:00Z") == 1

        # 2. the run's last commit meets the lock: the lease retries it until the writer resumes
        # 3. the acknowledgement meets a locked queue file: the worker sends it again
        for hour, locked, event in (("03", state, "store.retry"), ("04", queue_file, None)):
            trigger.tick("hourly", at(f"2026-01-20T{hour}:00Z"))
            with capture_events() as events:
                polled: list[int] = []
                done = threading.Thread(target=lambda out=polled: out.append(worker.poll(wait=5)))
                done.start()
                assert started[hour].wait(10)
                with paused_writer(str(locked)):
                    release[hour].set()
                    wanted = event or "worker.settle_retry"
                    _poll_until(lambda w=wanted: any(e["event"] == w for e in events), 15)
                done.join(30)
            assert not done.is_alive() and polled == [1]  # no error escaped the poll
            assert [e["event"] for e in events].count("run.completed") == 1
            assert _attempts(store, f"2026-01-20T{hour}:00Z") == 1
        assert queue.receive(visibility=60) == []  # every delivery was acknowledged
        assert calls == [f"hourly:2026-01-20T{h}:00Z" for h in ("02", "03", "04")]
    finally:
        store.close()
        queue.close()


def _attempts(store: SQLiteStore, window: str) -> int:
    """The attempts of a succeeded run (fails when the window did not succeed)."""
    record = store.get(Key(RUN, "hourly", window))
    assert record is not None
    run = RunRecord.from_data(record.data)
    assert run.state is RunState.SUCCEEDED
    return run.attempt


def _poll_until(condition: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
