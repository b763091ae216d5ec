"""Buffered acks on the PostgreSQL queue (``cronwarden.adapters.postgres.acks``): an ack rides
on the next receive's statement, is flushed when the worker goes idle and on close, a stale
receiver's ack settles nothing, and a crash before the flush runs nothing twice (the message
comes back, the claim refuses it as a duplicate, the status counts it). On a real server."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cronwarden import Engine, Trigger, Worker
from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore
from cronwarden.model.ports import STATUS, Key
from tests.support.harness import at

from . import acks_child
from .conftest import sql

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[2]
W = at("2026-01-20T02:00Z")


def _rows(settings: PostgresSettings) -> int:
    (row,) = sql(settings.dsn, f'SELECT count(*) FROM "{settings.schema}".messages')
    return int(row[0])


def _poll(predicate: Callable[[], object], deadline: float = 30.0, what: str = "condition") -> None:
    end = time.monotonic() + deadline
    while not predicate():
        assert time.monotonic() < end, f"{what} not reached within {deadline}s"
        time.sleep(0.02)


def test_an_ack_rides_on_the_next_receive(
    make_queue: Callable[..., PostgresQueue], settings: PostgresSettings
) -> None:
    queue = make_queue(ack_flush=3600.0)
    queue.publish(b"one")
    queue.publish(b"two")
    (first,) = queue.receive(1, wait=5)
    queue.ack(first)
    assert _rows(settings) == 2  # buffered: not sent yet
    before = queue.db.statements
    (second,) = queue.receive(1, wait=5)
    assert queue.db.statements - before == 1  # the ack and the receive: one statement
    assert second.body == b"two"
    assert _rows(settings) == 1
    queue.ack(second)
    assert queue.depth() == 0  # depth sends the buffered acks first


def test_a_buffered_ack_is_flushed_when_the_worker_is_idle(
    make_queue: Callable[..., PostgresQueue], settings: PostgresSettings
) -> None:
    queue = make_queue(ack_flush=0.3)
    queue.publish(b"m")
    (d,) = queue.receive(1, wait=5)
    before = queue.db.statements
    queue.ack(d)
    # no further call on the queue: the flusher sends it within the bound
    _poll(lambda: _rows(settings) == 0, deadline=10, what="idle flush")
    assert queue.db.statements - before == 1


def test_close_flushes_buffered_acks(
    settings: PostgresSettings,
) -> None:
    queue = PostgresQueue(settings, ack_flush=3600.0)
    try:
        for body in (b"a", b"b", b"c"):
            queue.publish(body)
        got = queue.receive(3, wait=5)
        assert len(got) == 3
        for d in got:
            queue.ack(d)
        assert _rows(settings) == 3
        before = queue.db.statements
    finally:
        queue.close()
    assert queue.db.statements - before == 1  # three acks, one statement
    assert _rows(settings) == 0
    queue.close()  # idempotent


def test_ack_flush_zero_sends_each_ack_at_once(
    make_queue: Callable[..., PostgresQueue], settings: PostgresSettings
) -> None:
    queue = make_queue(ack_flush=0)
    queue.publish(b"m")
    (d,) = queue.receive(1, wait=5)
    queue.ack(d)
    assert _rows(settings) == 0


def test_a_stale_receivers_buffered_ack_settles_nothing(
    make_queue: Callable[..., PostgresQueue],
    settings: PostgresSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stale, owner = make_queue(ack_flush=3600.0), make_queue(ack_flush=3600.0)
    stale.publish(b"m")
    (first,) = stale.receive(1, visibility=0.5, wait=5)
    second: list[object] = []
    _poll(lambda: second.extend(owner.receive(1, visibility=60)) or second, what="redelivery")
    stale.ack(first)  # too late: the owner holds it now
    with caplog.at_level(logging.WARNING, logger="cronwarden.postgres"):
        assert stale.receive(1) == []  # sends the stale ack with the receive
    assert _rows(settings) == 1  # the owner's delivery survives
    ignored = [r for r in caplog.records if getattr(r, "event", "") == "queue.settle_ignored"]
    assert [r.message_id for r in ignored] == [first.message_id]  # type: ignore[attr-defined]
    owner.ack(second[0])  # type: ignore[arg-type]
    assert owner.depth() == 0


def test_a_crash_before_the_flush_runs_nothing_twice(
    make_queue: Callable[..., PostgresQueue],
    make_store: Callable[..., PostgresStore],
    settings: PostgresSettings,
    tmp_path: Path,
) -> None:
    effects = tmp_path / "effects.txt"
    effects.touch()
    jobs = acks_child.jobs(str(effects))
    queue, store = make_queue(ack_flush=3600.0), make_store()
    Trigger(jobs, queue).tick("once", W)
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.postgres.acks_child",
            settings.dsn,
            settings.schema,
            str(effects),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "acked"
        assert effects.read_text().splitlines() == ["once:2026-01-20T02:00Z"]
        assert _rows(settings) == 1  # the run is over, its ack still buffered
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert _rows(settings) == 1  # the kill lost the ack

    worker = Worker(Engine(jobs, store), queue)
    worker.visibility = 30.0
    end = time.monotonic() + 30
    while worker.poll(wait=2.0) == 0:
        assert time.monotonic() < end, "the message was not delivered again"
    assert effects.read_text().splitlines() == ["once:2026-01-20T02:00Z"]  # not run twice
    status = store.get(Key(STATUS, "once"))
    assert status is not None and status.data.get("duplicates") == 1
    assert queue.depth() == 0  # the duplicate was acked


def test_a_failed_send_keeps_the_acks_and_the_flusher_sends_them_again() -> None:
    from cronwarden.adapters.postgres.acks import AckBuffer, PendingAck

    sent: list[list[int]] = []
    failures = [ConnectionError("database restarting")]

    def send(acks: list[PendingAck]) -> None:
        if failures:
            raise failures.pop()
        sent.append([a.seq for a in acks])

    buffer = AckBuffer(0.05, send)
    buffer.add(PendingAck(1, "r1", "m1"))
    taken = buffer.take()  # a receive took it, and its statement failed
    buffer.add(PendingAck(2, "r2", "m2"))
    buffer.put_back(taken)
    _poll(lambda: sent, deadline=10, what="resend")  # first try fails, the next one sends
    assert sent == [[1, 2]] and not failures
    buffer.add(PendingAck(3, "r3", "m3"))
    buffer.close()  # sends what is left
    assert sent == [[1, 2], [3]]
    assert buffer.add(PendingAck(4, "r4", "m4")) is False  # closed: the caller sends it
