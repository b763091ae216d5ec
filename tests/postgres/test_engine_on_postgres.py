"""The run protocol on the Postgres store and queue: the round-trip budget of a happy-path run
(store round trips as the port counts them, and the SQL statements actually sent), a ledger run,
and a racing pair of workers on one window."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import cronwarden
from cronwarden import Engine, JobSet, OutcomeKind, RunContext, RunRequest, Trigger, Worker
from cronwarden.adapters.postgres import PostgresQueue, PostgresStore
from cronwarden.model.ports import RUN, STATUS, Key
from tests.support.harness import at

pytestmark = pytest.mark.postgres
W = at("2026-01-20T02:00Z")


def _jobs(calls: list[str]) -> JobSet:
    def ok(ctx: RunContext) -> None:
        calls.append(ctx.run_key)

    def fan(ctx: RunContext) -> None:
        for item in ctx.items(range(250), batch_size=100):
            calls.append(f"{ctx.run_key}/{item.key}")

    return JobSet(
        [
            cronwarden.job("ok", cron="0 * * * *", max_runtime="5m")(ok),
            cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(fan),
        ]
    )


def test_happy_path_round_trips(
    make_store: Callable[..., PostgresStore], make_queue: Callable[..., PostgresQueue]
) -> None:
    calls: list[str] = []
    jobs = _jobs(calls)
    store, queue = make_store(), make_queue(ack_flush=60.0)
    engine = Engine(jobs, store)
    trigger, worker = Trigger(jobs, queue, store), Worker(engine, queue)
    store.get(Key(STATUS, "ok"))  # first use migrates the schema: not part of a run
    queue.depth()

    rt, st, qt = store.round_trips, store.db.statements, queue.db.statements
    trigger.tick("ok", W)
    assert worker.poll(wait=10) == 1
    assert calls == ["ok:2026-01-20T02:00Z"]
    store_rt, store_sql = store.round_trips - rt, store.db.statements - st
    queue_sql = queue.db.statements - qt
    print(
        f"happy path: {store_rt} store round trips, {store_sql} store statements, "
        f"{queue_sql} queue statements (publish, receive; the ack is buffered)"
    )
    assert store_rt == 2 and store_sql == 2  # claim, complete: one statement each
    assert queue_sql == 2  # publish, receive: the ack rides on the next receive
    assert queue.receive(10) == [] and queue.db.statements - qt == 3
    assert queue.depth() == 0  # the ack went with that receive: nothing left to flush
    assert queue.db.statements - qt == 4  # the count itself
    run = store.get(Key(RUN, "ok", "2026-01-20T02:00Z"))
    assert run is not None and run.data["state"] == "succeeded"


def test_ledger_run_is_one_statement_per_batch(
    make_store: Callable[..., PostgresStore],
) -> None:
    calls: list[str] = []
    store = make_store()
    engine = Engine(_jobs(calls), store)
    store.get(Key(STATUS, "fan"))
    rt, st = store.round_trips, store.db.statements
    assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.SUCCEEDED
    assert len(calls) == 250
    print(
        f"ledger run (250 items, batches of 100): {store.round_trips - rt} round trips, "
        f"{store.db.statements - st} statements"
    )
    assert store.round_trips - rt == store.db.statements - st == 2 + 3


def test_two_hosts_racing_on_one_window_run_it_once(
    make_store: Callable[..., PostgresStore],
) -> None:
    calls: list[str] = []
    jobs = _jobs(calls)
    engines = [Engine(jobs, make_store()) for _ in range(4)]
    outcomes: list[OutcomeKind] = []
    barrier = threading.Barrier(len(engines))

    def run(engine: Engine) -> None:
        barrier.wait()
        outcomes.append(engine.execute(RunRequest("ok", W)).kind)

    threads = [threading.Thread(target=run, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["ok:2026-01-20T02:00Z"]
    assert outcomes.count(OutcomeKind.SUCCEEDED) == 1
    assert all(
        o in (OutcomeKind.SUCCEEDED, OutcomeKind.IN_PROGRESS, OutcomeKind.DUPLICATE)
        for o in outcomes
    )


def test_a_batch_of_one_jobs_windows_is_one_statement_per_run(
    make_store: Callable[..., PostgresStore], make_queue: Callable[..., PostgresQueue]
) -> None:
    """Each completion claims the next window of the batch in its own statement (the lock
    handed over), so 5 windows cost 6 store statements, not 10; every window ran once."""
    from datetime import timedelta

    calls: list[str] = []
    jobs = _jobs(calls)
    store, queue = make_store(), make_queue()
    engine = Engine(jobs, store)
    trigger, worker = Trigger(jobs, queue, store), Worker(engine, queue)
    store.get(Key(STATUS, "ok"))
    windows = [W + timedelta(hours=i) for i in range(5)]
    for window in windows:
        trigger.tick("ok", window)
    before = store.db.statements
    assert worker.poll(max_messages=10, wait=10) == 5
    assert store.db.statements - before == 6
    assert calls == [f"ok:{w:%Y-%m-%dT%H:%M}Z" for w in windows]
    for window in windows:
        run = store.get(Key(RUN, "ok", f"{window:%Y-%m-%dT%H:%M}Z"))
        assert run is not None and (run.data["state"], run.data["attempt"]) == ("succeeded", 1)
    assert store.get(Key("lock", "ok")) is None
    status = store.get(Key(STATUS, "ok"))
    assert status is not None and status.data["windows_open"] == 0
    assert status.data["windows_recorded"] == 5
