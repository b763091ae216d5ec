"""The Redis Streams queue beyond the conformance suite: receivers on several hosts, stale
receipts, delayed delivery, dedup across hosts, redrive order, ``holds``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from cronwarden.adapters.redis import RedisQueue
from cronwarden.model.ports import REDRIVE_ATTRIBUTE, Delivery

pytestmark = pytest.mark.redis


def test_capabilities_describe_the_broker(make_queue: Callable[..., RedisQueue]) -> None:
    queue = make_queue(max_deliveries=4)
    assert queue.capabilities.dedup is True
    assert queue.capabilities.max_deliveries == 4
    policy = queue.dead_letter_policy()
    assert policy.exists and policy.max_deliveries == 4


def test_hosts_receiving_at_once_get_each_message_once(
    make_queue: Callable[..., RedisQueue],
) -> None:
    queues = [make_queue() for _ in range(4)]
    for i in range(60):
        queues[0].publish(str(i).encode())
    got: list[Delivery] = []
    lock = threading.Lock()

    def work(queue: RedisQueue) -> None:
        while True:
            batch = queue.receive(5, visibility=30, wait=0.5)
            if not batch:
                return
            for d in batch:
                queue.ack(d)
            with lock:
                got.extend(batch)

    threads = [threading.Thread(target=work, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(int(d.body) for d in got) == list(range(60))
    assert queues[0].depth() == 0


def test_dedup_holds_across_hosts_racing(make_queue: Callable[..., RedisQueue]) -> None:
    queues = [make_queue() for _ in range(6)]
    barrier = threading.Barrier(len(queues))

    def publish(queue: RedisQueue) -> None:
        barrier.wait()
        queue.publish(b"once", dedup_id="run:w")

    threads = [threading.Thread(target=publish, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert queues[0].depth() == 1


def test_a_dedup_id_is_forgotten_after_the_window(make_queue: Callable[..., RedisQueue]) -> None:
    queue = make_queue(dedup_window=1)
    queue.publish(b"a", dedup_id="x")
    queue.publish(b"a", dedup_id="x")
    assert queue.depth() == 1
    end = time.monotonic() + 10
    while queue.depth() == 1:
        assert time.monotonic() < end, "the dedup id was never forgotten"
        queue.publish(b"a", dedup_id="x")
        time.sleep(0.1)
    assert queue.depth() == 2


def test_a_delayed_message_arrives_when_due(make_queue: Callable[..., RedisQueue]) -> None:
    queue = make_queue()
    queue.publish(b"later", delay=1.0, attributes={"run_key": "j:w"})
    assert queue.holds("j:w") and not queue.holds("j:other")
    assert queue.receive(1, visibility=30, wait=0.3) == []
    (d,) = queue.receive(1, visibility=30, wait=10)
    assert d.body == b"later" and d.attempt == 1
    assert queue.holds("j:w")  # in flight: still held
    queue.ack(d)
    assert not queue.holds("j:w")


def test_a_stale_receipt_settles_nothing(make_queue: Callable[..., RedisQueue]) -> None:
    first, second = make_queue(), make_queue()
    first.publish(b"m")
    (old,) = first.receive(1, visibility=0.2, wait=5)
    (new,) = second.receive(1, visibility=30, wait=10)  # redelivered after the visibility
    assert new.attempt == 2
    first.ack(old)  # too late: another receiver holds it
    first.dead_letter(old, "Stale", "")
    assert second.depth() == 1 and second.dlq_depth() == 0
    second.ack(new)
    assert second.depth() == 0


def test_retry_redelivers_after_the_delay_with_attempt_plus_one(
    make_queue: Callable[..., RedisQueue],
) -> None:
    queue = make_queue()
    queue.publish(b"m")
    (d,) = queue.receive(1, visibility=30, wait=5)
    queue.retry(d, 0.5)
    queue.ack(d)  # the retried delivery's receipt is no longer current
    (again,) = queue.receive(1, visibility=30, wait=10)
    assert again.attempt == 2
    queue.ack(again)


def test_redrive_keeps_order_and_counts_generations(
    make_queue: Callable[..., RedisQueue], admin: Any
) -> None:
    queue = make_queue()
    for i in range(3):
        queue.publish(f"m{i}".encode())
    for _ in range(3):
        (d,) = queue.receive(1, visibility=30, wait=5)
        queue.dead_letter(d, "Bad", f"body {d.body!r}")
    dead = queue.dlq_peek(10)
    assert [x.body for x in dead] == [b"m0", b"m1", b"m2"]
    assert all(x.reason == "Bad" and x.attempts == 1 for x in dead)
    assert dead[0].dead_lettered_at is not None
    assert queue.redrive(3) == 3
    bodies = []
    for _ in range(3):
        (d,) = queue.receive(1, visibility=30, wait=5)
        assert d.attributes[REDRIVE_ATTRIBUTE] == "1"
        bodies.append(d.body)
        queue.dead_letter(d, "Again", "")
    assert bodies == [b"m0", b"m1", b"m2"]
    assert queue.redrive(1) == 1
    (d,) = queue.receive(1, visibility=30, wait=5)
    assert d.attributes[REDRIVE_ATTRIBUTE] == "2"
