"""Postgres, a restarted server: a real private server restarted (fast shutdown by its pid, then
started again on its data directory) while the store's and queue's pools hold idle connections
the restart made stale. No operation after the restart fails for it: each stale connection is
replaced before use. A run that straddles the restart completes and is acknowledged at once, and
the next window is taken on the first poll."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import cronwarden
from cronwarden import Engine, JobSet, RunContext, Trigger, Worker
from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore
from cronwarden.emulators.postgres import PostgresServer, missing_reason
from cronwarden.model.ports import RUN, STATUS, Create, Key, Merge
from cronwarden.model.records import RunRecord
from cronwarden.model.runs import RunState
from cronwarden.testing import capture_events
from tests.support.harness import at

from .pgserver import restart

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
W = at("2026-01-20T02:00Z")


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    """A server of this test's own (the session's shared one is never restarted)."""
    reason = missing_reason()
    if reason is not None:
        pytest.fail(f"PostgreSQL tests cannot run: {reason}", pytrace=False)
    started = PostgresServer().start()
    try:
        yield started
    finally:
        started.stop()


def _settings(server: PostgresServer) -> PostgresSettings:
    return PostgresSettings(dsn=server.dsn, schema="cw_restart", expire_every=0, pool_min=4)


def _warm(*calls: Any) -> None:
    """Run ``calls`` at once from threads, so the pools hold several idle connections."""
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)


def test_no_operation_fails_on_a_stale_connection_after_a_restart(server: PostgresServer) -> None:
    settings = _settings(server)
    store, queue = PostgresStore(settings), PostgresQueue(settings)
    try:
        key = Key(STATUS, "j", "j")
        store.commit([Merge(key, {"n": 0})])
        queue.publish(b"before")
        _warm(*[lambda: store.get(key) for _ in range(6)], *[queue.depth for _ in range(6)])
        idle = store.db.pool.get_stats().get("pool_available", 0)
        assert idle >= 2, f"the store's pool holds {idle} idle connection(s)"
        pid = server.pid
        restart(server)
        assert server.pid != pid
        # every operation, first try, on both pools: none may meet a stale connection
        for n in range(1, 8):
            assert store.get(key) is not None
            store.commit([Merge(key, {"n": n})])
        store.commit([Create(Key(RUN, "j", "w"), {"x": 1})])
        assert len(store.query(RUN, "j")) == 1
        queue.publish(b"after")
        received = queue.receive(2, visibility=60)
        assert sorted(d.body for d in received) == [b"after", b"before"]
        for delivery in received:
            queue.ack(delivery)
        assert queue.depth() == 0
    finally:
        store.close()
        queue.close()


def test_a_run_straddling_a_restart_completes_and_the_next_window_is_taken_at_once(
    server: PostgresServer,
) -> None:
    started, restarted = threading.Event(), threading.Event()
    calls: list[str] = []

    def handler(ctx: RunContext) -> None:
        calls.append(ctx.run_key)
        started.set()
        assert restarted.wait(60)

    job = cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")(handler)
    jobs = JobSet([job])
    settings = _settings(server)
    store, queue = PostgresStore(settings), PostgresQueue(settings)
    engine = Engine(jobs, store)
    trigger, worker = Trigger(jobs, queue, store), Worker(engine, queue)
    try:
        _warm(*[lambda: store.get(Key(STATUS, "hourly", "hourly")) for _ in range(6)])
        _warm(*[queue.depth for _ in range(6)])
        trigger.tick("hourly", W)
        with capture_events() as events:
            polled: list[int] = []
            thread = threading.Thread(target=lambda: polled.append(worker.poll(wait=10)))
            thread.start()
            assert started.wait(30)
            restart(server)  # while the handler runs
            restarted.set()
            thread.join(60)
            assert not thread.is_alive() and polled == [1]
            # the next window right after the restart: published, taken on the first poll
            trigger.tick("hourly", at("2026-01-20T03:00Z"))
            assert worker.poll(wait=10) == 1
        failures = [e for e in events if e["event"] in ("worker.error", "worker.settle_retry")]
        assert failures == []
        assert [e["event"] for e in events].count("run.completed") == 2
        for window in ("2026-01-20T02:00Z", "2026-01-20T03:00Z"):
            record = store.get(Key(RUN, "hourly", window))
            assert record is not None
            run = RunRecord.from_data(record.data)
            assert run.state is RunState.SUCCEEDED and run.attempt == 1
        assert calls == ["hourly:2026-01-20T02:00Z", "hourly:2026-01-20T03:00Z"]
        assert queue.depth() == 0  # both acknowledged: nothing waits for a visibility timeout
    finally:
        store.close()
        queue.close()


def test_a_read_whose_backend_is_terminated_is_read_again_a_write_is_unknown(
    server: PostgresServer,
) -> None:
    """A connection that passed the check and then lost its backend (``57P01``, as a restart
    racing the check would): a read is sent once more on a fresh connection; a write is of
    unknown outcome (it may have been applied), never sent again blindly."""
    from cronwarden.adapters.postgres.database import Database
    from cronwarden.model.errors import CommitOutcomeUnknown

    db = Database(_settings(server))
    backends: list[int] = []

    def work(conn: Any) -> int:
        backends.append(conn.info.backend_pid)
        if len(backends) == 1:  # the first attempt's backend is terminated under it
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return int(conn.execute("SELECT 42").fetchone()[0])

    try:
        assert db.run(work, what="read", writes=False) == 42
        assert len(backends) == 2 and backends[0] != backends[1]
        backends.clear()
        with pytest.raises(CommitOutcomeUnknown, match="AdminShutdown"):
            db.run(work, what="write", writes=True)
        assert len(backends) == 1
        assert db.run(lambda conn: 1, what="after", writes=True) == 1  # the pool recovered
    finally:
        db.close()
