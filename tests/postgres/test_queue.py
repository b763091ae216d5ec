"""Queue behaviour beyond the conformance suite: several hosts receiving at once, publish
de-duplication across hosts, LISTEN/NOTIFY wake-ups, stale receipts, per-message delivery
limits. On a real server."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from cronwarden.adapters.postgres import PostgresQueue
from cronwarden.model.ports import Delivery

from .conftest import sql

pytestmark = pytest.mark.postgres


def poll(predicate: Callable[[], object], deadline: float = 30.0, what: str = "condition") -> None:
    end = time.monotonic() + deadline
    while not predicate():
        assert time.monotonic() < end, f"{what} not reached within {deadline}s"
        time.sleep(0.05)


def test_capabilities_describe_the_broker(make_queue: Callable[..., PostgresQueue]) -> None:
    queue = make_queue(max_deliveries=4)
    assert queue.capabilities.dedup is True
    assert queue.capabilities.max_deliveries == 4
    assert queue.capabilities.max_delay is None


def test_hosts_receiving_at_once_get_each_message_once(
    make_queue: Callable[..., PostgresQueue],
) -> None:
    hosts = [make_queue() for _ in range(4)]
    n = 60
    for i in range(n):
        hosts[i % 4].publish(f"{i}".encode())
    got: list[bytes] = []
    guard = threading.Lock()

    def work(queue: PostgresQueue) -> None:
        while True:
            batch = queue.receive(3, visibility=60, wait=0.5)
            if not batch:
                return
            for d in batch:
                queue.ack(d)
            with guard:
                got.extend(d.body for d in batch)

    threads = [threading.Thread(target=work, args=(q,)) for q in hosts for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Counter(got) == Counter(f"{i}".encode() for i in range(n))


def test_dedup_holds_across_hosts_racing(make_queue: Callable[..., PostgresQueue]) -> None:
    hosts = [make_queue() for _ in range(6)]
    barrier = threading.Barrier(len(hosts))

    def fire(queue: PostgresQueue) -> None:
        barrier.wait()
        queue.publish(b"run", dedup_id="billing:2026-01-20T02:00Z")

    threads = [threading.Thread(target=fire, args=(q,)) for q in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert hosts[0].depth() == 1


def test_a_dedup_id_is_forgotten_after_the_window(
    make_queue: Callable[..., PostgresQueue],
) -> None:
    queue = make_queue(dedup_window=1)
    queue.publish(b"a", dedup_id="k")
    queue.publish(b"a", dedup_id="k")
    assert queue.depth() == 1

    def again() -> bool:
        queue.publish(b"a", dedup_id="k")
        return queue.depth() == 2

    poll(again, what="re-publish after the dedup window")
    poll(lambda: queue.sweep_dedup() == 1, what="the sweep to forget the id")


def test_an_idle_receiver_wakes_on_notify(make_queue: Callable[..., PostgresQueue]) -> None:
    worker, publisher = make_queue(), make_queue()
    worker.receive(1, wait=0.01)  # starts the listener
    wakeups = worker._wakeups
    assert wakeups is not None and wakeups.listening
    result: list[tuple[list[Delivery], float]] = []
    started = threading.Event()

    def wait_for_work() -> None:
        started.set()
        t0 = time.monotonic()
        got = worker.receive(1, wait=60)
        result.append((got, time.monotonic() - t0))

    before = worker.db.statements
    thread = threading.Thread(target=wait_for_work)
    thread.start()
    started.wait()
    # an empty receive and the next-visible read: the receiver is asleep on the listener now
    poll(lambda: worker.db.statements >= before + 2, what="the receiver to be waiting")
    generation = wakeups.generation
    sent = time.monotonic()
    publisher.publish(b"wake up")
    thread.join(60)
    ((got, _),) = result
    assert [d.body for d in got] == [b"wake up"]
    assert wakeups.generation > generation  # woken by the notification, not by a timer
    print(f"idle-wake latency: {(time.monotonic() - sent) * 1000:.1f} ms")


def test_a_delayed_message_wakes_the_waiting_receiver_when_due(
    make_queue: Callable[..., PostgresQueue],
) -> None:
    queue = make_queue()
    queue.publish(b"later", delay=1.0)
    assert queue.receive(1, wait=0) == []
    got = queue.receive(1, wait=30)
    assert [d.body for d in got] == [b"later"]


def test_the_listener_reconnects_after_its_connection_is_killed(
    settings: object, make_queue: Callable[..., PostgresQueue], postgres_dsn: str
) -> None:
    worker, publisher = make_queue(), make_queue()
    worker.receive(1, wait=0.01)
    wakeups = worker._wakeups
    assert wakeups is not None
    before = wakeups.generation
    killed = sql(
        postgres_dsn,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'cronwarden-listen' AND query LIKE %s",
        (f"%{worker.channel}%",),
    )
    assert killed
    poll(lambda: wakeups.generation >= before + 2 and wakeups.listening, what="reconnect")
    publisher.publish(b"after reconnect")
    got = worker.receive(1, wait=30)
    assert [d.body for d in got] == [b"after reconnect"]


def test_a_stale_receipt_settles_nothing(make_queue: Callable[..., PostgresQueue]) -> None:
    queue = make_queue()
    queue.publish(b"m")
    first = queue.receive(1, visibility=0.5, wait=5)[0]
    second: list[Delivery] = []
    poll(lambda: second.extend(queue.receive(1, visibility=60)) or second, what="redelivery")
    queue.ack(first)  # too late: the second receiver owns it now
    queue.dead_letter(first, "Stale")
    assert queue.depth() == 1 and queue.dlq_depth() == 0
    queue.ack(second[0])
    assert queue.depth() == 0


def test_a_message_can_lower_its_delivery_limit(make_queue: Callable[..., PostgresQueue]) -> None:
    queue = make_queue(max_deliveries=5)
    queue.publish(b"fragile", attributes={"cw-max-deliveries": "1"})
    assert len(queue.receive(1, visibility=0.01, wait=5)) == 1
    poll(lambda: not queue.receive(1, visibility=0.01) and queue.dlq_depth() == 1, what="DLQ")
    (dead,) = queue.dlq_peek()
    assert dead.reason == "MaxDeliveryCountExceeded" and dead.attempts == 1


def test_redrive_keeps_order_and_is_capped(make_queue: Callable[..., PostgresQueue]) -> None:
    queue = make_queue()
    for i in range(4):
        queue.publish(f"{i}".encode())
    for _ in range(4):
        queue.dead_letter(queue.receive(1, wait=5)[0], "Bad", "token=abc123 leaked")
    assert all("abc123" not in d.description for d in queue.dlq_peek())
    assert queue.redrive(3) == 3 and queue.dlq_depth() == 1
    bodies = [queue.receive(1)[0].body for _ in range(3)]
    assert bodies == [b"0", b"1", b"2"]
