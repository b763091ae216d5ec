"""The Queue contract (see ``cronwarden.model.ports.Queue``), run against every adapter.

Reusable as :class:`QueueContract`: subclass it and provide a ``queue_factory`` fixture.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronwarden.model.ports import REDRIVE_ATTRIBUTE, Delivery, Queue

from ._collect import attach_tests, opened

DEADLINE = 60.0


def receive_one(queue: Queue, *, visibility: float = 30.0, deadline: float = DEADLINE) -> Delivery:
    """Poll until one message arrives or the deadline passes."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        got = queue.receive(1, visibility=visibility, wait=min(2.0, end - time.monotonic()))
        if got:
            assert len(got) == 1
            return got[0]
    raise AssertionError("no message within the deadline")


def drain(queue: Queue, *, quiet: float = 1.5) -> list[Delivery]:
    """Everything receivable now, acked; stops after ``quiet`` seconds without a message."""
    out: list[Delivery] = []
    while True:
        got = queue.receive(10, visibility=30.0, wait=quiet)
        if not got:
            return out
        for d in got:
            queue.ack(d)
        out.extend(got)


def wait_for(predicate: Callable[[], bool], deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met within the deadline")


def test_publish_receive_ack(queue: Queue) -> None:
    queue.publish(b'{"hello":"world"}', attributes={"job": "a", "x": "ü"})
    d = receive_one(queue)
    assert d.body == b'{"hello":"world"}'
    assert d.attributes["job"] == "a" and d.attributes["x"] == "ü"
    assert d.attempt == 1
    queue.ack(d)
    assert drain(queue) == []


def test_binary_body_round_trips(queue: Queue) -> None:
    body = bytes(range(256)) * 4
    queue.publish(body)
    d = receive_one(queue)
    assert d.body == body
    queue.ack(d)


def test_received_message_is_invisible_to_others(queue: Queue) -> None:
    queue.publish(b"one")
    d = receive_one(queue, visibility=30.0)
    assert queue.receive(1, visibility=30.0, wait=1.0) == []
    queue.ack(d)


def test_unsettled_message_is_redelivered_with_attempt_plus_one(queue: Queue) -> None:
    queue.publish(b"again")
    first = receive_one(queue, visibility=1.0)
    second = receive_one(queue, visibility=30.0)
    assert second.body == b"again"
    assert second.attempt == first.attempt + 1
    queue.ack(second)


def test_retry_with_delay_redelivers_later(queue: Queue) -> None:
    queue.publish(b"later")
    first = receive_one(queue)
    queue.retry(first, delay=1.0)
    second = receive_one(queue)
    assert second.body == b"later" and second.attempt == first.attempt + 1
    queue.ack(second)


def test_dedup_id_suppresses_duplicate_publish(queue: Queue) -> None:
    queue.publish(b"a", dedup_id="job:2026-01-20T02:00Z")
    queue.publish(b"a", dedup_id="job:2026-01-20T02:00Z")
    queue.publish(b"b", dedup_id="job:2026-01-20T03:00Z")
    bodies = sorted(d.body for d in drain(queue))
    # Brokers without deduplication may deliver the duplicate; the store dedupes for real then.
    assert bodies in ([b"a", b"b"], [b"a", b"a", b"b"])
    if getattr(queue, "deduplicates", True):
        assert bodies == [b"a", b"b"]


def test_dead_letter_with_reason_then_peek_and_redrive(queue: Queue) -> None:
    queue.publish(b"poison", attributes={"job": "p"})
    d = receive_one(queue)
    queue.dead_letter(d, "MaxAttemptsExceeded", "failed 5 times: ValueError")
    wait_for(lambda: queue.dlq_depth() == 1)
    peeked = queue.dlq_peek(10)
    assert len(peeked) == 1
    assert peeked[0].body == b"poison"
    assert peeked[0].reason == "MaxAttemptsExceeded"
    assert "ValueError" in peeked[0].description
    assert peeked[0].attributes.get("job") == "p"
    assert queue.dlq_depth() == 1  # peek does not consume
    assert drain(queue, quiet=1.0) == []

    assert queue.redrive(10) == 1
    again = receive_one(queue)
    assert again.body == b"poison"
    assert again.attributes[REDRIVE_ATTRIBUTE] == "1"
    assert again.attributes.get("job") == "p"
    queue.ack(again)
    wait_for(lambda: queue.dlq_depth() == 0)


def test_redrive_moves_capped_batches(queue: Queue) -> None:
    for i in range(5):
        queue.publish(f"m{i}".encode())
    for _ in range(5):
        queue.dead_letter(receive_one(queue), "Bad", "")
    wait_for(lambda: queue.dlq_depth() == 5)
    assert queue.redrive(2) == 2
    wait_for(lambda: queue.dlq_depth() == 3)
    assert len(drain(queue)) == 2
    assert queue.redrive(10) == 3
    assert len(drain(queue)) == 3
    wait_for(lambda: queue.dlq_depth() == 0)


def test_dlq_remove_removes_exactly_the_named_letters(queue: Queue) -> None:
    """``dlq_remove`` deletes the letters named and no other, or (a broker that cannot remove
    single letters) raises ``NotImplementedError`` with every letter still there."""
    for body in (b"first", b"second"):
        queue.publish(body)
        queue.dead_letter(receive_one(queue), "PermanentError", "the contract's")
    wait_for(lambda: queue.dlq_depth() == 2)
    letters = {letter.body: letter.message_id for letter in queue.dlq_peek(10)}
    assert set(letters) == {b"first", b"second"}
    try:
        assert queue.dlq_remove([]) == 0
        removed = queue.dlq_remove([letters[b"first"], "no-such-letter"])
    except NotImplementedError:
        assert queue.dlq_depth() == 2
        return
    assert removed == 1
    wait_for(lambda: queue.dlq_depth() == 1)
    assert [letter.body for letter in queue.dlq_peek(10)] == [b"second"]
    assert queue.dlq_remove([letters[b"first"]]) == 0  # gone already: nothing else removed
    assert queue.dlq_depth() == 1


def test_broker_dead_letters_after_max_deliveries(queue: Queue) -> None:
    limit = getattr(queue, "max_deliveries", 3)
    queue.publish(b"crashloop")
    attempts: list[int] = []
    end = time.monotonic() + DEADLINE * 2
    while queue.dlq_depth() == 0 and time.monotonic() < end:
        got = queue.receive(1, visibility=1.0, wait=1.0)
        attempts.extend(d.attempt for d in got)  # never settled: a worker that keeps crashing
    assert queue.dlq_depth() == 1
    assert attempts[:limit] == list(range(1, limit + 1))
    assert len(attempts) == limit
    (dead,) = queue.dlq_peek(1)
    assert dead.body == b"crashloop"
    assert dead.reason  # the broker names why (e.g. MaxDeliveryCountExceeded)


def test_extend_keeps_message_invisible(queue: Queue) -> None:
    queue.publish(b"long")
    d = receive_one(queue, visibility=2.0)
    queue.extend(d, 30.0)
    time.sleep(3.0)  # past the original visibility: the point is that nothing happens
    assert queue.receive(1, visibility=30.0, wait=0.5) == []
    queue.ack(d)


@pytest.mark.parametrize("n", [25])
def test_many_messages_each_delivered(queue: Queue, n: int) -> None:
    for i in range(n):
        queue.publish(f"{i}".encode())
    bodies = sorted(int(d.body) for d in drain(queue))
    assert bodies == list(range(n))


class QueueContract:
    """The Queue contract as a test class: ``class TestMyQueue(QueueContract): pass``.

    Needs a ``queue_factory`` fixture: a callable taking ``max_deliveries=`` and returning a
    fresh, empty queue, or a context manager yielding one. The tests read
    ``queue.max_deliveries`` (a broker whose smallest dead-letter setting is larger uses its
    own) and ``queue.deduplicates`` (False: a repeated ``dedup_id`` may be delivered twice).
    The tests run on real time: visibility timeouts of 1-3 s, about 20 s per backend.
    """

    @pytest.fixture
    def queue(self, queue_factory: Callable[..., Any]) -> Iterator[Queue]:
        with opened(queue_factory(max_deliveries=3)) as made:
            yield made


attach_tests(QueueContract, dict(globals()))
