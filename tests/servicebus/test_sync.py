"""Every behaviour of issue 4 through the real azure-servicebus sync client."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import MessageLockLostError

from cronwarden.emulators.servicebus.pytest_plugin import ServiceBusEmulator

from .conftest import receive, wait_for

pytestmark = pytest.mark.azure


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def test_send_single_list_and_batch_then_receive_all(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("one"))
        sender.send_messages([ServiceBusMessage("two"), ServiceBusMessage("three")])
        batch = sender.create_message_batch()
        for body in ("four", "five", "six"):
            batch.add_message(ServiceBusMessage(body))
        sender.send_messages(batch)
    with client.get_queue_receiver(queue) as receiver:
        got = receive(receiver, 6)
        assert [str(m) for m in got] == ["one", "two", "three", "four", "five", "six"]
        assert [m.sequence_number for m in got] == [1, 2, 3, 4, 5, 6]
        assert all(m.delivery_count == 0 for m in got)
        assert all(m.enqueued_time_utc is not None for m in got)
        assert all(m.locked_until_utc and m.locked_until_utc > _now() for m in got)
        for m in got:
            receiver.complete_message(m)
        assert receiver.receive_messages(max_wait_time=0.5) == []


def test_properties_round_trip(client: ServiceBusClient, queue: str) -> None:
    sent = ServiceBusMessage(
        b"\x00\x01binary",
        application_properties={"job": "billing", "attempt": 3, "ok": True, "ratio": 0.5},
        content_type="application/json",
        correlation_id="corr-1",
        subject="billing-sync",
        message_id="msg-42",
        to="someone",
        reply_to="replies",
        time_to_live=dt.timedelta(minutes=5),
    )
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(sent)
    with client.get_queue_receiver(queue) as receiver:
        (got,) = receive(receiver, 1)
        assert b"".join(got.body) == b"\x00\x01binary"
        assert got.application_properties == {
            b"job": b"billing",
            b"attempt": 3,
            b"ok": True,
            b"ratio": 0.5,
        }
        assert got.content_type == "application/json"
        assert got.correlation_id == "corr-1"
        assert got.subject == "billing-sync"
        assert got.message_id == "msg-42"
        assert got.to == "someone"
        assert got.reply_to == "replies"
        assert got.time_to_live == dt.timedelta(minutes=5)
        receiver.complete_message(got)


def test_receive_and_delete(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
    with client.get_queue_receiver(
        queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        got = receive(receiver, 3)
        assert sorted(str(m) for m in got) == ["m0", "m1", "m2"]
        assert receiver.receive_messages(max_wait_time=0.5) == []
    with client.get_queue_receiver(queue) as receiver:
        assert receiver.peek_messages(10) == []


def test_abandon_redelivers_with_incremented_count(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("again"))
    with client.get_queue_receiver(queue) as receiver:
        (first,) = receive(receiver, 1)
        receiver.abandon_message(first)
        (second,) = receive(receiver, 1)
        assert str(second) == "again"
        assert second.delivery_count == 1
        assert second.lock_token != first.lock_token
        receiver.complete_message(second)


def test_dead_letter_with_reason_and_receive_from_dlq(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("poison", application_properties={"k": "v"}))
    with client.get_queue_receiver(queue) as receiver:
        (msg,) = receive(receiver, 1)
        receiver.dead_letter_message(msg, reason="BadJson", error_description="line 1: oops")
        assert receiver.receive_messages(max_wait_time=0.5) == []
    with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive(dlq, 1)
        assert str(dead) == "poison"
        assert dead.dead_letter_reason == "BadJson"
        assert dead.dead_letter_error_description == "line 1: oops"
        assert dead.application_properties[b"k"] == b"v"
        assert dead.sequence_number == msg.sequence_number
        dlq.complete_message(dead)
        assert dlq.peek_messages(5) == []


def test_defer_and_receive_deferred(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage("later"), ServiceBusMessage("now")])
    with client.get_queue_receiver(queue) as receiver:
        first, second = receive(receiver, 2)
        receiver.defer_message(first)
        receiver.complete_message(second)
        assert receiver.receive_messages(max_wait_time=0.5) == []
        (deferred,) = receiver.receive_deferred_messages([first.sequence_number])
        assert str(deferred) == "later"
        assert deferred.lock_token is not None
        peeked = receiver.peek_messages(5, sequence_number=1)
        assert [p.sequence_number for p in peeked] == [first.sequence_number]
        receiver.complete_message(deferred)
        assert receiver.peek_messages(5, sequence_number=1) == []


def test_deferred_message_can_be_abandoned_and_dead_lettered(
    client: ServiceBusClient, queue: str
) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("d"))
    with client.get_queue_receiver(queue) as receiver:
        (msg,) = receive(receiver, 1)
        receiver.defer_message(msg)
        (again,) = receiver.receive_deferred_messages(msg.sequence_number)
        receiver.abandon_message(again)  # stays deferred
        (third,) = receiver.receive_deferred_messages(msg.sequence_number)
        receiver.dead_letter_message(third, reason="Deferred", error_description="gave up")
    with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive(dlq, 1)
        assert dead.dead_letter_reason == "Deferred"
        dlq.complete_message(dead)


def test_renew_message_lock(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("long job"))
    with client.get_queue_receiver(queue) as receiver:
        (msg,) = receive(receiver, 1)
        before = msg.locked_until_utc
        assert before is not None
        # Renew past the original 1 s lock three times; the message must stay ours.
        for _ in range(3):
            near_expiry = before - dt.timedelta(milliseconds=400)
            wait_for(lambda t=near_expiry: _now() >= t, deadline=5)
            new_until = receiver.renew_message_lock(msg)
            assert new_until > before
            before = new_until
        receiver.complete_message(msg)


def test_lock_expiry_redelivers_with_count_plus_one(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("slow"))
    with client.get_queue_receiver(queue) as receiver:
        (first,) = receive(receiver, 1)
        assert first.delivery_count == 0
        (second,) = receive(receiver, 1, deadline=10)  # arrives once the 1 s lock expired
        assert second.sequence_number == first.sequence_number
        assert second.delivery_count == 1
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(first)
        receiver.complete_message(second)


def test_settling_after_lock_expiry_is_lock_lost_via_management(
    client: ServiceBusClient, queue: str
) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("x"))
    with client.get_queue_receiver(queue) as receiver:
        (msg,) = receive(receiver, 1)
        receiver.defer_message(msg)
        (deferred,) = receiver.receive_deferred_messages(msg.sequence_number)
        until = deferred.locked_until_utc
        assert until is not None
        wait_for(lambda: _now() > until + dt.timedelta(milliseconds=200), deadline=5)
        with pytest.raises(MessageLockLostError):
            receiver.renew_message_lock(deferred)


def test_max_delivery_count_moves_to_dlq(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("fails"))
    with client.get_queue_receiver(queue) as receiver:
        for attempt in range(3):  # MaxDeliveryCount=3
            (msg,) = receive(receiver, 1)
            assert msg.delivery_count == attempt
            receiver.abandon_message(msg)
        assert receiver.receive_messages(max_wait_time=0.5) == []
    with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive(dlq, 1)
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
        assert "3 delivery attempts" in (dead.dead_letter_error_description or "")
        dlq.complete_message(dead)


def test_ttl_expiry_dead_letters_when_configured(
    client: ServiceBusClient, make_queue: Callable[..., str]
) -> None:
    name = make_queue(dead_lettering_on_expiration=True)
    with client.get_queue_sender(name) as sender:
        # the SDK truncates TTLs to whole seconds
        sender.send_messages(ServiceBusMessage("stale", time_to_live=dt.timedelta(seconds=1)))
        sender.send_messages(ServiceBusMessage("fresh"))
    with client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive(dlq, 1)
        assert str(dead) == "stale"
        assert dead.dead_letter_reason == "TTLExpiredException"
        dlq.complete_message(dead)
    with client.get_queue_receiver(name) as receiver:
        (live,) = receive(receiver, 1)
        assert str(live) == "fresh"
        receiver.complete_message(live)


def test_ttl_expiry_drops_without_dead_lettering(
    client: ServiceBusClient, make_queue: Callable[..., str], sb: ServiceBusEmulator
) -> None:
    name = make_queue(default_ttl=0.5)
    with client.get_queue_sender(name) as sender:
        sender.send_messages(ServiceBusMessage("gone"))

    def empty() -> bool:
        counts = {q["name"]: q for q in sb.queues()}[name]
        return counts["messages"] == 0 and counts["dead_letter"] == 0

    wait_for(empty, deadline=5)
    with client.get_queue_receiver(name) as receiver:
        assert receiver.receive_messages(max_wait_time=0.5) == []


def test_schedule_and_cancel(client: ServiceBusClient, queue: str) -> None:
    due = _now() + dt.timedelta(seconds=2)
    with client.get_queue_sender(queue) as sender:
        soon = sender.schedule_messages(ServiceBusMessage("soon"), due)
        never = sender.schedule_messages([ServiceBusMessage("never")], due)
        assert len(soon) == 1 and len(never) == 1
        sender.cancel_scheduled_messages(never)
    with client.get_queue_receiver(queue) as receiver:
        peeked = receiver.peek_messages(5, sequence_number=1)
        assert [str(p) for p in peeked] == ["soon"]
        assert peeked[0].state == ServiceBusMessageState.SCHEDULED
        assert peeked[0].scheduled_enqueue_time_utc is not None
        (msg,) = receive(receiver, 1, deadline=6)
        assert _now() >= due
        assert str(msg) == "soon"
        assert msg.sequence_number == soon[0]
        assert msg.enqueued_time_utc is not None
        assert msg.enqueued_time_utc >= due - dt.timedelta(milliseconds=50)
        receiver.complete_message(msg)
        assert receiver.peek_messages(5, sequence_number=1) == []


def test_scheduled_enqueue_time_on_a_plain_send(client: ServiceBusClient, queue: str) -> None:
    due = _now() + dt.timedelta(seconds=2)
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("delayed", scheduled_enqueue_time_utc=due))
    with client.get_queue_receiver(queue) as receiver:
        (peeked,) = receiver.peek_messages(1, sequence_number=1)
        assert peeked.state == ServiceBusMessageState.SCHEDULED
        (msg,) = receive(receiver, 1, deadline=6)
        assert _now() >= due
        assert str(msg) == "delayed"
        receiver.complete_message(msg)


def test_peek_does_not_lock(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(f"p{i}") for i in range(5)])
    with client.get_queue_receiver(queue) as receiver:
        first = receiver.peek_messages(2)
        assert [str(m) for m in first] == ["p0", "p1"]
        rest = receiver.peek_messages(10)  # continues after the last peeked
        assert [str(m) for m in rest] == ["p2", "p3", "p4"]
        again = receiver.peek_messages(10, sequence_number=1)
        assert len(again) == 5
        got = receive(receiver, 5)
        assert len(got) == 5
        for m in got:
            receiver.complete_message(m)


def test_duplicate_detection_within_window(
    client: ServiceBusClient, make_queue: Callable[..., str]
) -> None:
    name = make_queue(requires_duplicate_detection=True, duplicate_detection_window=1.0)
    with client.get_queue_sender(name) as sender:
        sender.send_messages(ServiceBusMessage("a", message_id="same"))
        sender.send_messages(ServiceBusMessage("b", message_id="same"))
        sender.send_messages([ServiceBusMessage("c", message_id="other")])
    with client.get_queue_receiver(name) as receiver:
        got = receive(receiver, 3, deadline=2)
        assert [str(m) for m in got] == ["a", "c"]
        for m in got:
            receiver.complete_message(m)
    time.sleep(1.1)  # let the detection window pass (this is the behaviour under test)
    with client.get_queue_sender(name) as sender:
        sender.send_messages(ServiceBusMessage("d", message_id="same"))
    with client.get_queue_receiver(name) as receiver:
        (late,) = receive(receiver, 1)
        assert str(late) == "d"
        receiver.complete_message(late)


def test_no_duplicate_detection_by_default(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage("a", message_id="x")] * 2)
    with client.get_queue_receiver(queue) as receiver:
        got = receive(receiver, 2)
        assert len(got) == 2
        for m in got:
            receiver.complete_message(m)


@pytest.mark.parametrize("size", [300 * 1024, 1024 * 1024])
def test_large_messages(client: ServiceBusClient, queue: str, size: int) -> None:
    payload = bytes(uuid.uuid4().bytes * (size // 16))
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage(payload))
    with client.get_queue_receiver(queue) as receiver:
        (msg,) = receive(receiver, 1)
        assert b"".join(msg.body) == payload
        receiver.complete_message(msg)


def test_messages_survive_receiver_close_without_settlement(
    client: ServiceBusClient, queue: str
) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("kept"))
    with client.get_queue_receiver(queue) as receiver:
        (msg,) = receive(receiver, 1)
    # closed without settling: redelivered after the lock expires
    with client.get_queue_receiver(queue) as receiver:
        (again,) = receive(receiver, 1, deadline=10)
        assert again.sequence_number == msg.sequence_number
        receiver.complete_message(again)
