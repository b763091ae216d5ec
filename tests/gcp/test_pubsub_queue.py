"""PubSubQueue specifics beyond the conformance suite: policy bounds, the resources it creates,
dead-letter attributes, redrive generations, delayed publish and stale settles."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from cronwarden.adapters.gcp import PubSubQueue
from cronwarden.adapters.gcp.queue import (
    ATTEMPTS_ATTRIBUTE,
    DESCRIPTION_ATTRIBUTE,
    NOT_BEFORE_ATTRIBUTE,
    ORIGINAL_ID_ATTRIBUTE,
)
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import REASON_ATTRIBUTE, REDRIVE_ATTRIBUTE, Delivery

pytestmark = pytest.mark.gcp
MakeQueue = Callable[..., PubSubQueue]


def receive_one(
    queue: PubSubQueue, *, visibility: float = 30.0, deadline: float = 30.0
) -> Delivery:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        got = queue.receive(1, visibility=visibility, wait=1.0)
        if got:
            return got[0]
    raise AssertionError("no message within the deadline")


def pull_raw(queue: PubSubQueue, subscription: str) -> list[Any]:
    """Messages on ``subscription`` as Pub/Sub holds them (released again afterwards)."""
    items = queue._pull(subscription, 100)
    queue._modack(subscription, [i.ack_id for i in items], 0)
    return items


@pytest.mark.parametrize("bad", [0, 3, 4, 101, 1000])
def test_dead_letter_policy_bounds_are_refused(bad: int) -> None:
    with pytest.raises(ConfigurationError, match="5 to 100"):
        PubSubQueue("p", "runs", "worker", max_deliveries=bad)


@pytest.mark.parametrize("good", [5, 100])
def test_dead_letter_policy_bounds_are_accepted(good: int) -> None:
    assert PubSubQueue("p", "runs", "worker", max_deliveries=good).max_deliveries == good


@pytest.mark.parametrize(
    "options",
    [
        {"ack_deadline": 9},
        {"ack_deadline": 601},
        {"retry_backoff": (5.0, 1.0)},
        {"retry_backoff": (0.0, 601.0)},
    ],
)
def test_other_policy_values_are_checked(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        PubSubQueue("p", "runs", "worker", **options)


def test_building_a_queue_opens_no_connection() -> None:
    queue = PubSubQueue("p", "runs", "worker")
    assert queue._clients is None
    assert queue.dead_letter_topic == "projects/p/topics/runs-dead-letter"
    assert queue.dead_letter_subscription == "projects/p/subscriptions/worker-dead-letter"


@pytest.mark.parametrize("name", ["t", "9runs", "goog-runs", "a b c", "x" * 256])
def test_invalid_resource_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid Pub/Sub"):
        PubSubQueue("p", name, "worker")


def test_created_subscription_carries_the_policies(make_queue: MakeQueue) -> None:
    queue = make_queue(max_deliveries=7, ack_deadline=120, retry_backoff=(10.0, 300.0))
    sub = queue.subscriber.get_subscription(subscription=queue.subscription)
    assert sub.dead_letter_policy.dead_letter_topic == queue.dead_letter_topic
    assert sub.dead_letter_policy.max_delivery_attempts == 7
    assert sub.ack_deadline_seconds == 120
    assert sub.retry_policy.minimum_backoff.total_seconds() == 10
    assert sub.retry_policy.maximum_backoff.total_seconds() == 300
    dlq = queue.subscriber.get_subscription(subscription=queue.dead_letter_subscription)
    assert dlq.topic == queue.dead_letter_topic


def test_existing_subscription_is_aligned(make_queue: MakeQueue) -> None:
    first = make_queue(max_deliveries=5)
    first.ensure_resources()
    again = PubSubQueue(
        first.project,
        "runs",
        "worker",
        max_deliveries=9,
        emulator_host=first.emulator_host,
        create_missing=True,
        retry_backoff=None,
    )
    try:
        sub = again.subscriber.get_subscription(subscription=again.subscription)
        assert sub.dead_letter_policy.max_delivery_attempts == 9
    finally:
        again.close()


def test_dead_letter_publishes_with_reason_attributes_then_acks(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.publish(b"{not json", attributes={"job": "x"})
    d = receive_one(queue)
    queue.dead_letter(d, "MalformedRequest", "Expecting property name: line 1 column 2")
    (item,) = pull_raw(queue, queue.dead_letter_subscription)
    attrs = dict(item.message.attributes)
    assert attrs[REASON_ATTRIBUTE] == "MalformedRequest"
    assert "line 1" in attrs[DESCRIPTION_ATTRIBUTE]
    assert attrs[ATTEMPTS_ATTRIBUTE] == "1" and attrs[ORIGINAL_ID_ATTRIBUTE] == d.message_id
    assert attrs["job"] == "x" and item.message.data == b"{not json"
    assert queue.receive(1, wait=1.5) == []  # acked on the work subscription
    (dead,) = queue.dlq_peek()
    assert dead.message_id == d.message_id and dead.attributes == {"job": "x"}


def test_long_reason_is_clipped_to_an_attribute_value(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.publish(b"x")
    queue.dead_letter(receive_one(queue), "Bad", "é" * 2000)
    (dead,) = queue.dlq_peek()
    assert len(dead.description.encode()) <= 1024 and dead.description.startswith("éé")


def test_redrive_generations_count_up(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.publish(b"p", attributes={"job": "p"})
    d = receive_one(queue)
    for generation in ("1", "2"):
        queue.dead_letter(d, "Bad", "boom")
        assert queue.redrive(5) == 1
        d = receive_one(queue)
        assert d.attributes[REDRIVE_ATTRIBUTE] == generation
        assert d.attributes["job"] == "p"
        assert REASON_ATTRIBUTE not in d.attributes
        assert d.attempt == 1  # a redriven message is a new message with a fresh budget
    queue.ack(d)
    assert queue.dlq_depth() == 0


def test_broker_dead_letter_reads_back_with_reason_and_attempts(make_queue: MakeQueue) -> None:
    queue = make_queue(retry_backoff=None)
    queue.publish(b"crash", attributes={"job": "c"})
    end = time.monotonic() + 60
    while queue.dlq_depth() == 0 and time.monotonic() < end:
        for d in queue.receive(1, visibility=1.0, wait=1.0):
            queue.retry(d, 0)  # a worker that keeps failing
    (dead,) = queue.dlq_peek()
    assert dead.reason == "MaxDeliveryAttemptsExceeded"
    assert dead.attempts == 5
    assert "worker" in dead.description
    assert dead.attributes == {"job": "c"}


def test_delayed_publish_is_hidden_until_due(make_queue: MakeQueue) -> None:
    queue = make_queue()
    start = time.monotonic()
    queue.publish(b"later", delay=3.0)
    assert queue.receive(1, wait=1.0) == []
    d = receive_one(queue)
    assert time.monotonic() - start >= 3.0
    assert NOT_BEFORE_ATTRIBUTE in d.attributes
    queue.ack(d)


def test_settling_an_expired_delivery_is_ignored(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.publish(b"m")
    first = receive_one(queue, visibility=1.0)
    second = receive_one(queue)
    queue.ack(first)  # stale: must not raise
    queue.extend(first, 30)
    queue.ack(second)
    assert queue.receive(1, wait=1.5) == []


def test_dedup_id_travels_as_an_attribute(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.publish(b"a", dedup_id="job:2026-01-20T02:00Z")
    d = receive_one(queue)
    assert d.attributes["cw-dedup-id"] == "job:2026-01-20T02:00Z"
    assert queue.deduplicates is False
    queue.ack(d)


def test_visibility_beyond_one_ack_deadline_is_kept_up(make_queue: MakeQueue) -> None:
    queue = make_queue(max_visibility=2)  # one extension reaches 600 s on Pub/Sub; 2 s here
    queue.publish(b"long")
    start = time.monotonic()
    first = receive_one(queue, visibility=6)
    time.sleep(4.0)  # two caps later: the point is that nothing happens
    assert queue.receive(1, wait=0.5) == []
    again = receive_one(queue)
    assert time.monotonic() - start >= 6.0
    assert again.attempt == first.attempt + 1
    queue.ack(again)


def test_settling_or_a_short_extend_stops_keeping(make_queue: MakeQueue) -> None:
    queue = make_queue(max_visibility=2)
    queue.publish(b"m")
    d = receive_one(queue, visibility=30)
    assert queue._keeper.pending() == 1
    queue.extend(d, 1.5)
    assert queue._keeper.pending() == 0
    queue.extend(d, 30)
    assert queue._keeper.pending() == 1
    queue.ack(d)
    assert queue._keeper.pending() == 0
    queue.close()
