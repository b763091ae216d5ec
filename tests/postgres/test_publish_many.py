"""``Publisher.publish_many``: the PostgreSQL queue enqueues a batch in one statement (order,
de-duplication within the window and within the batch, delays, one NOTIFY), the trigger's
oldest-first batches (catch-up, backfill) use it, and the port's default publishes one by one."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest

import cronwarden
from cronwarden import Engine, JobSet, RunContext, RunRequest, Trigger, Worker
from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore
from cronwarden.model.ports import AFTER_ATTRIBUTE, Outgoing
from cronwarden.model.runs import format_window
from cronwarden.testing.queue import MemoryQueue
from tests.support.harness import at

W = at("2026-01-20T02:00Z")


def _drain(queue: PostgresQueue | MemoryQueue) -> list[bytes]:
    out: list[bytes] = []
    while got := queue.receive(10, visibility=30.0):
        for d in got:
            out.append(d.body)
            queue.ack(d)
    return out


@pytest.mark.postgres
def test_a_batch_is_one_statement_in_order_deduplicated(
    make_queue: Callable[..., PostgresQueue],
) -> None:
    queue = make_queue()
    queue.publish(b"seen", dedup_id="k0")
    before = queue.db.statements
    queue.publish_many(
        [
            Outgoing(b"a", {"n": "1"}, "k1"),
            Outgoing(b"seen again", None, "k0"),  # seen within the window: nothing
            Outgoing(b"b"),  # no dedup id
            Outgoing(b"a twice", None, "k1"),  # earlier in the same batch: nothing
            Outgoing(b"c", None, "k2"),
            Outgoing(b"later", None, "k3", delay=60.0),
        ]
    )
    assert queue.db.statements - before == 1
    got = queue.receive(10, visibility=30.0, wait=5)
    assert [d.body for d in got] == [b"seen", b"a", b"b", b"c"]
    assert got[1].attributes == {"n": "1"} and got[1].message_id == "k1"
    for d in got:
        queue.ack(d)
    assert queue.depth() == 1  # the delayed one waits
    queue.publish_many([])  # nothing to send: no statement
    queue.publish_many([Outgoing(b"x", None, "k1")])  # still within the window
    assert queue.depth() == 1


@pytest.mark.postgres
def test_a_batch_sends_one_notify(
    make_queue: Callable[..., PostgresQueue], settings: PostgresSettings
) -> None:
    import psycopg
    from psycopg import sql

    queue = make_queue()
    queue.depth()
    with psycopg.connect(settings.dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(queue.channel)))
        queue.publish_many([Outgoing(b"1"), Outgoing(b"2"), Outgoing(b"3")])
        first = next(listener.notifies(timeout=10), None)
        assert first is not None and first.channel == queue.channel
        assert list(listener.notifies(timeout=0.5)) == []  # one for the batch
        queue.publish_many([Outgoing(b"dup", None, "k"), Outgoing(b"dup", None, "k")])
        assert next(listener.notifies(timeout=10), None) is not None
        queue.publish_many([Outgoing(b"dup", None, "k")])  # nothing enqueued: no wake-up
        assert list(listener.notifies(timeout=0.5)) == []


@pytest.mark.postgres
def test_a_backfill_batch_is_one_publish_and_runs_oldest_first(
    make_queue: Callable[..., PostgresQueue], make_store: Callable[..., PostgresStore]
) -> None:
    ran: list[str] = []

    def handler(ctx: RunContext) -> None:
        ran.append(format_window(ctx.window))

    jobs = JobSet([cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")(handler)])
    queue, store = make_queue(), make_store()
    queue.depth()
    windows = [W - timedelta(hours=i) for i in range(8)]
    requests = [RunRequest("hourly", w, reason="backfill") for w in windows]  # newest first
    before = queue.db.statements
    Trigger(jobs, queue, store).publish_oldest_first(requests)
    assert queue.db.statements - before == 1
    deliveries = queue.receive(10, visibility=30.0, wait=5)
    expected = [format_window(w) for w in sorted(windows)]
    assert [d.attributes.get(AFTER_ATTRIBUTE) for d in deliveries] == [None, *expected[:-1]]
    for d in deliveries:
        queue.retry(d, 0.0)
    worker = Worker(Engine(jobs, store), queue)
    end = time.monotonic() + 60
    while len(ran) < len(windows):
        assert time.monotonic() < end, f"ran only {ran}"
        worker.poll(max_messages=10, wait=1.0)
    assert ran == expected


def test_the_default_publishes_one_by_one_in_order() -> None:
    queue = MemoryQueue()
    queue.publish_many(
        [Outgoing(b"a", None, "k1"), Outgoing(b"b"), Outgoing(b"a again", None, "k1")]
    )
    assert _drain(queue) == [b"a", b"b"]
