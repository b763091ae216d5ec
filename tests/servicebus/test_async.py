"""The same behaviours through the azure-servicebus *async* client (``azure.servicebus.aio``).

Each test drives one coroutine with ``asyncio.run`` so no pytest async plugin is needed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient, ServiceBusReceiver
from azure.servicebus.exceptions import MessageLockLostError

from cronwarden.emulators.servicebus.pytest_plugin import ServiceBusEmulator

pytestmark = pytest.mark.azure


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def _receive(receiver: ServiceBusReceiver, count: int, deadline: float = 10.0) -> list[Any]:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    got: list[Any] = []
    while len(got) < count and loop.time() < end:
        wait = max(0.1, min(2.0, end - loop.time()))
        got += await receiver.receive_messages(
            max_message_count=count - len(got), max_wait_time=wait
        )
    return got


def _run(sb: ServiceBusEmulator, body: Callable[[ServiceBusClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with ServiceBusClient.from_connection_string(
            sb.connection_string, retry_total=1
        ) as client:
            await body(client)

    asyncio.run(main())


def test_send_receive_complete_abandon_dead_letter(sb: ServiceBusEmulator, queue: str) -> None:
    async def body(client: ServiceBusClient) -> None:
        async with client.get_queue_sender(queue) as sender:
            await sender.send_messages(ServiceBusMessage("a", application_properties={"n": 1}))
            await sender.send_messages([ServiceBusMessage("b"), ServiceBusMessage("c")])
            batch = await sender.create_message_batch()
            batch.add_message(ServiceBusMessage("d", subject="s", correlation_id="cid"))
            await sender.send_messages(batch)
        async with client.get_queue_receiver(queue) as receiver:
            a, b, c, d = await _receive(receiver, 4)
            assert [str(m) for m in (a, b, c, d)] == ["a", "b", "c", "d"]
            assert a.application_properties == {b"n": 1}
            assert (d.subject, d.correlation_id) == ("s", "cid")
            await receiver.complete_message(a)
            await receiver.abandon_message(b)
            await receiver.dead_letter_message(c, reason="why", error_description="because")
            await receiver.complete_message(d)
            (again,) = await _receive(receiver, 1)
            assert str(again) == "b" and again.delivery_count == 1
            await receiver.complete_message(again)
        async with client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER
        ) as dlq:
            (dead,) = await _receive(dlq, 1)
            assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
                "why",
                "because",
            )
            await dlq.complete_message(dead)

    _run(sb, body)


def test_receive_and_delete_and_peek(sb: ServiceBusEmulator, queue: str) -> None:
    async def body(client: ServiceBusClient) -> None:
        async with client.get_queue_sender(queue) as sender:
            await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(4)])
        async with client.get_queue_receiver(queue) as peeker:
            peeked = await peeker.peek_messages(10)
            assert [str(m) for m in peeked] == ["m0", "m1", "m2", "m3"]
        async with client.get_queue_receiver(
            queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver:
            got = await _receive(receiver, 4)
            assert len(got) == 4
            assert await receiver.peek_messages(10, sequence_number=1) == []

    _run(sb, body)


def test_defer_renew_and_lock_expiry(sb: ServiceBusEmulator, queue: str) -> None:
    async def body(client: ServiceBusClient) -> None:
        async with client.get_queue_sender(queue) as sender:
            await sender.send_messages([ServiceBusMessage("defer me"), ServiceBusMessage("slow")])
        async with client.get_queue_receiver(queue) as receiver:
            first, second = await _receive(receiver, 2)
            await receiver.defer_message(first)
            (deferred,) = await receiver.receive_deferred_messages([first.sequence_number])
            renewed = await receiver.renew_message_lock(deferred)
            assert renewed > _now()
            await receiver.complete_message(deferred)
            # second is left to expire (1 s lock) and comes back with delivery_count 1
            (back,) = await _receive(receiver, 1)
            assert back.sequence_number == second.sequence_number
            assert back.delivery_count == 1
            with pytest.raises(MessageLockLostError):
                await receiver.complete_message(second)
            await receiver.complete_message(back)

    _run(sb, body)


def test_max_delivery_count_and_schedule(sb: ServiceBusEmulator, queue: str) -> None:
    async def body(client: ServiceBusClient) -> None:
        # a lead that outlasts the steps before the peek on a loaded machine
        due = _now() + dt.timedelta(seconds=8)
        async with client.get_queue_sender(queue) as sender:
            await sender.send_messages(ServiceBusMessage("poison"))
            (seq,) = await sender.schedule_messages(ServiceBusMessage("later"), due)
            (cancelled,) = await sender.schedule_messages(ServiceBusMessage("never"), due)
            await sender.cancel_scheduled_messages(cancelled)
        async with client.get_queue_receiver(queue) as receiver:
            states = {m.sequence_number: m.state for m in await receiver.peek_messages(10)}
            assert states[seq] == ServiceBusMessageState.SCHEDULED
            assert cancelled not in states
            for _ in range(3):
                (msg,) = await _receive(receiver, 1)
                assert str(msg) == "poison"
                await receiver.abandon_message(msg)
            (later,) = await _receive(receiver, 1, deadline=20)
            assert str(later) == "later" and _now() >= due
            await receiver.complete_message(later)
        async with client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER
        ) as dlq:
            (dead,) = await _receive(dlq, 1)
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
            await dlq.complete_message(dead)

    _run(sb, body)


def test_duplicate_detection_ttl_and_large(
    sb: ServiceBusEmulator, make_queue: Callable[..., str]
) -> None:
    name = make_queue(
        requires_duplicate_detection=True,
        dead_lettering_on_expiration=True,
    )
    payload = b"x" * (400 * 1024)

    async def body(client: ServiceBusClient) -> None:
        async with client.get_queue_sender(name) as sender:
            await sender.send_messages(ServiceBusMessage("one", message_id="id-1"))
            await sender.send_messages(ServiceBusMessage("dup", message_id="id-1"))
            await sender.send_messages(ServiceBusMessage(payload, message_id="big"))
            await sender.send_messages(
                ServiceBusMessage("stale", message_id="s", time_to_live=dt.timedelta(seconds=1))
            )
        async with client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = await _receive(dlq, 1)
            assert dead.dead_letter_reason == "TTLExpiredException"
            await dlq.complete_message(dead)
        async with client.get_queue_receiver(name) as receiver:
            one, big = await _receive(receiver, 2)
            assert str(one) == "one"
            assert b"".join(big.body) == payload
            for m in (one, big):
                await receiver.complete_message(m)
            assert await receiver.receive_messages(max_wait_time=0.5) == []

    _run(sb, body)
