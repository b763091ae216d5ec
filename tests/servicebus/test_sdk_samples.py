"""What each official azure-servicebus 7.15.0 queue sample does, written here through the public
SDK against the emulator (our code, not the samples'; the samples themselves run in
``test_official_samples.py``, fetched from the SDK's sdist). One test per sample family, sync and
async where the sample has both:

    authenticate_* / generate_sas_token_*       test_credentials_*
    client_identity_authentication              test_token_credentials_need_accept_any_key
    send_queue                                  test_send_single_list_and_batch_*
    receive_queue / receive_iterator_queue      test_receive_batch_and_iterate_*
    receive_peek                                test_peek_*
    receive_deferred_message_queue              test_deferred_*
    receive_deadlettered_messages               test_dead_letter_and_read_the_dlq_*
    deadletter_messages_and_correct             test_deadletter_and_correct_*
    schedule_messages_and_cancellation          test_schedule_and_cancel_*
    send_and_receive_amqp_annotated_message     test_annotated_bodies_*
    auto_lock_renew                             test_lock_renewal_failure_callback_* (+ the
                                                concurrency tests in test_fidelity.py)
    failure_and_recovery                        test_send_batches_with_retries_then_iterate

Not here, with the reason: proxy and connection_to_custom_endpoint_address (AMQP over
WebSockets: see test_fidelity.py and test_official_samples.py); sample_code_servicebus (topics
and sessions).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote_plus

import pytest
from azure.core.credentials import AccessToken, AzureNamedKeyCredential, AzureSasCredential
from azure.servicebus import (
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import AutoLockRenewer as AsyncAutoLockRenewer
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageSizeExceededError,
    ServiceBusAuthenticationError,
)

from cronwarden.emulators.servicebus import EmulatorServer, default_config
from cronwarden.emulators.servicebus.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, SasValidator
from cronwarden.emulators.servicebus.pytest_plugin import ServiceBusEmulator

from .conftest import receive

pytestmark = [pytest.mark.azure, pytest.mark.timeout(90)]


def _namespace(sb: ServiceBusEmulator) -> str:
    return f"{sb.host}:{sb.port}"


def _count(sb: ServiceBusEmulator, queue: str, key: str = "messages") -> int:
    return int(next(q for q in sb.queues() if q["name"] == queue)[key])


async def _receive_async(receiver: Any, count: int, deadline: float = 10.0) -> list[Any]:
    end = time.monotonic() + deadline
    got: list[Any] = []
    while len(got) < count and time.monotonic() < end:
        got += await receiver.receive_messages(max_message_count=count - len(got), max_wait_time=1)
    return got


# --- credentials ------------------------------------------------------------------------


def _sign(uri: str, key_name: str, key: str, ttl: int = 300) -> str:
    """A SAS token written by hand, as an application would (raw resource URI, signed raw)."""
    expiry = str(int(time.time()) + ttl)
    digest = hmac.new(key.encode(), f"{uri}\n{expiry}".encode(), hashlib.sha256).digest()
    signature = quote_plus(base64.b64encode(digest).decode())
    return f"SharedAccessSignature sr={uri}&sig={signature}&se={expiry}&skn={key_name}"


class _StaticTokenCredential:
    """A credential object with ``get_token`` returning a fixed token."""

    def __init__(self, token: str, token_type: bytes = b"servicebus.windows.net:sastoken"):
        self.token = token
        self.token_type = token_type

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 300)


def _send_one(client: ServiceBusClient, queue: str, body: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage(body))


def test_credentials_sync(sb: ServiceBusEmulator, queue: str) -> None:
    ns = _namespace(sb)
    credentials: list[Any] = [
        AzureNamedKeyCredential(DEFAULT_KEY_NAME, DEFAULT_KEY),
        AzureSasCredential(_sign(f"sb://{ns}/{queue}", DEFAULT_KEY_NAME, DEFAULT_KEY)),
        _StaticTokenCredential(_sign(f"sb://{ns}/{queue}", DEFAULT_KEY_NAME, DEFAULT_KEY)),
    ]
    for i, credential in enumerate(credentials):
        with ServiceBusClient(ns, credential, use_tls=False) as client:
            _send_one(client, queue, f"cred-{i}")
    with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        _send_one(client, queue, "connection-string")
        with client.get_queue_receiver(queue) as receiver:
            got = receive(receiver, 4)
            assert sorted(str(m) for m in got) == [
                "connection-string",
                "cred-0",
                "cred-1",
                "cred-2",
            ]
            for m in got:
                receiver.complete_message(m)


def test_credentials_async(sb: ServiceBusEmulator, queue: str) -> None:
    ns = _namespace(sb)

    async def main() -> None:
        for credential in (
            AzureNamedKeyCredential(DEFAULT_KEY_NAME, DEFAULT_KEY),
            AzureSasCredential(_sign(f"sb://{ns}/{queue}", DEFAULT_KEY_NAME, DEFAULT_KEY)),
        ):
            async with (
                AsyncServiceBusClient(ns, credential, use_tls=False) as client,
                client.get_queue_sender(queue) as sender,
            ):
                await sender.send_messages(ServiceBusMessage("x"))
        bad = AzureNamedKeyCredential(DEFAULT_KEY_NAME, "not-the-key")
        async with AsyncServiceBusClient(ns, bad, use_tls=False, retry_total=0) as client:
            with pytest.raises(ServiceBusAuthenticationError):
                async with client.get_queue_sender(queue) as sender:
                    await sender.send_messages(ServiceBusMessage("x"))

    asyncio.run(main())
    assert _count(sb, queue) == 2


def test_token_credentials_need_accept_any_key() -> None:
    """client_identity_authentication uses Entra ID tokens (JWT), which the emulator cannot
    verify: refused by default, accepted with ``--accept-any-key``."""
    jwt = _StaticTokenCredential("eyJhbGciOiJSUzI1NiJ9.e30.c2ln", token_type=b"jwt")
    for accept_any, expect_error in ((False, True), (True, False)):
        srv = EmulatorServer(default_config(), port=0, sas=SasValidator(accept_any=accept_any))
        srv.start()
        try:
            ns = f"{srv.host}:{srv.port}"
            with ServiceBusClient(ns, jwt, use_tls=False, retry_total=0) as client:  # type: ignore[arg-type]
                if expect_error:
                    with pytest.raises(ServiceBusAuthenticationError):
                        _send_one(client, "queue.1", "x")
                else:
                    _send_one(client, "queue.1", "x")
        finally:
            srv.stop()


# --- send / receive -----------------------------------------------------------------------


def test_send_single_list_and_batch_sync(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("single"))
        sender.send_messages([ServiceBusMessage(f"list-{i}") for i in range(3)])
        batch = sender.create_message_batch()
        added = 0
        for i in range(10):
            batch.add_message(ServiceBusMessage(f"batch-{i}"))
            added += 1
        sender.send_messages(batch)
        # a batch refuses what would exceed the size the link advertises
        small = sender.create_message_batch(max_size_in_bytes=1024)
        with pytest.raises(MessageSizeExceededError):
            small.add_message(ServiceBusMessage(b"z" * 2048))
    with client.get_queue_receiver(queue) as receiver:
        got = receive(receiver, 1 + 3 + added)
        assert len(got) == 14
        for m in got:
            receiver.complete_message(m)


def test_send_single_list_and_batch_async(sb: ServiceBusEmulator, queue: str) -> None:
    async def main() -> None:
        async with AsyncServiceBusClient.from_connection_string(sb.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage("single"))
                await sender.send_messages([ServiceBusMessage(f"l{i}") for i in range(3)])
                batch = await sender.create_message_batch()
                for i in range(10):
                    batch.add_message(ServiceBusMessage(f"b{i}"))
                await sender.send_messages(batch)
            async with client.get_queue_receiver(queue) as receiver:
                got = await _receive_async(receiver, 14)
                assert len(got) == 14
                for m in got:
                    await receiver.complete_message(m)

    asyncio.run(main())


def test_receive_batch_and_iterate_sync(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(str(i)) for i in range(6)])
    with client.get_queue_receiver(queue) as receiver:
        first = receiver.receive_messages(max_message_count=3, max_wait_time=5)
        assert 1 <= len(first) <= 3
        for m in first:
            receiver.complete_message(m)
    seen = [str(m) for m in first]
    with client.get_queue_receiver(queue, max_wait_time=2) as receiver:
        for m in receiver:  # the iterator ends after max_wait_time without a message
            seen.append(str(m))
            receiver.complete_message(m)
    assert sorted(seen) == [str(i) for i in range(6)]


def test_receive_batch_and_iterate_async(sb: ServiceBusEmulator, queue: str) -> None:
    async def main() -> list[str]:
        async with AsyncServiceBusClient.from_connection_string(sb.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages([ServiceBusMessage(str(i)) for i in range(6)])
            seen: list[str] = []
            async with client.get_queue_receiver(queue, max_wait_time=2) as receiver:
                async for m in receiver:
                    seen.append(str(m))
                    await receiver.complete_message(m)
            return seen

    assert sorted(asyncio.run(main())) == [str(i) for i in range(6)]


def test_peek_sync(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(str(i)) for i in range(3)])
    with client.get_queue_receiver(queue) as receiver:
        peeked = receiver.peek_messages(max_message_count=10)
        assert [str(m) for m in peeked] == ["0", "1", "2"]
        got = receive(receiver, 3)  # peeking did not lock anything
        assert len(got) == 3
        for m in got:
            receiver.complete_message(m)


def test_peek_async(sb: ServiceBusEmulator, queue: str) -> None:
    async def main() -> list[str]:
        async with AsyncServiceBusClient.from_connection_string(sb.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages([ServiceBusMessage(str(i)) for i in range(3)])
            async with client.get_queue_receiver(queue) as receiver:
                return [str(m) for m in await receiver.peek_messages(max_message_count=10)]

    assert asyncio.run(main()) == ["0", "1", "2"]


def test_deferred_sync(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(str(i)) for i in range(3)])
    with client.get_queue_receiver(queue) as receiver:
        got = receive(receiver, 3)
        seqs = []
        for m in got:
            seqs.append(m.sequence_number)
            receiver.defer_message(m)
        assert receiver.receive_messages(max_wait_time=1) == []
        deferred = receiver.receive_deferred_messages(sequence_numbers=seqs)
        assert sorted(str(m) for m in deferred) == ["0", "1", "2"]
        for m in deferred:
            receiver.complete_message(m)


def test_deferred_async(sb: ServiceBusEmulator, queue: str) -> None:
    async def main() -> None:
        async with AsyncServiceBusClient.from_connection_string(sb.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage("later"))
            async with client.get_queue_receiver(queue) as receiver:
                (m,) = await _receive_async(receiver, 1)
                await receiver.defer_message(m)
                (d,) = await receiver.receive_deferred_messages([m.sequence_number])
                assert str(d) == "later"
                await receiver.complete_message(d)

    asyncio.run(main())
    assert _count(sb, queue) == 0


def test_dead_letter_and_read_the_dlq_sync(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("poison"))
    with client.get_queue_receiver(queue) as receiver:
        (m,) = receive(receiver, 1)
        receiver.dead_letter_message(m, reason="Testing", error_description="for the sample")
    with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (d,) = receive(dlq, 1)
        assert (str(d), d.dead_letter_reason, d.dead_letter_error_description) == (
            "poison",
            "Testing",
            "for the sample",
        )
        dlq.complete_message(d)


def test_dead_letter_and_read_the_dlq_async(sb: ServiceBusEmulator, queue: str) -> None:
    async def main() -> str | None:
        async with AsyncServiceBusClient.from_connection_string(sb.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage("poison"))
            async with client.get_queue_receiver(queue) as receiver:
                (m,) = await _receive_async(receiver, 1)
                await receiver.dead_letter_message(m, reason="Testing")
            async with client.get_queue_receiver(
                queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER
            ) as dlq:
                (d,) = await _receive_async(dlq, 1)
                await dlq.complete_message(d)
                return d.dead_letter_reason

    assert asyncio.run(main()) == "Testing"


def _deadletter_and_correct(client: ServiceBusClient, queue: str) -> list[str]:
    """Abandon until MaxDeliveryCount moves a message to the DLQ; dead-letter the bad ones;
    resend corrected copies from the DLQ; receive the corrected ones."""
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("exceeds"))
    with client.get_queue_receiver(queue) as receiver:
        for _ in range(10):
            got = receiver.receive_messages(max_wait_time=2)
            if not got:
                break
            for m in got:
                receiver.abandon_message(m)
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(
            [ServiceBusMessage(f"m{i}", subject="Bad" if i % 2 == 0 else "Good") for i in range(4)]
        )
    with client.get_queue_receiver(queue) as receiver:
        for m in receive(receiver, 4):
            if m.subject == "Good":
                receiver.complete_message(m)
            else:
                receiver.dead_letter_message(m, reason="ProcessingError")
    corrected = []
    with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        dead = receive(dlq, 3)
        reasons = sorted(str(m.dead_letter_reason) for m in dead)
        assert reasons == ["MaxDeliveryCountExceeded", "ProcessingError", "ProcessingError"]
        for m in dead:
            if m.subject == "Bad":
                corrected.append(ServiceBusMessage(str(m), subject="Good"))
            dlq.complete_message(m)
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(corrected)
    with client.get_queue_receiver(queue) as receiver:
        fixed = receive(receiver, 2)
        for m in fixed:
            receiver.complete_message(m)
    return sorted(f"{m}:{m.subject}" for m in fixed)


def test_deadletter_and_correct_sync(client: ServiceBusClient, queue: str) -> None:
    assert _deadletter_and_correct(client, queue) == ["m0:Good", "m2:Good"]


def test_schedule_and_cancel_sync(client: ServiceBusClient, queue: str) -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    with client.get_queue_sender(queue) as sender:
        seqs = sender.schedule_messages([ServiceBusMessage("a"), ServiceBusMessage("b")], when)
        assert len(seqs) == 2
        sender.cancel_scheduled_messages(seqs[0])
    with client.get_queue_receiver(queue) as receiver:
        peeked = receiver.peek_messages(max_message_count=10)
        assert [str(m) for m in peeked] == ["b"]
        assert peeked[0].scheduled_enqueue_time_utc is not None
        assert receiver.receive_messages(max_wait_time=1) == []


def test_schedule_and_cancel_async(sb: ServiceBusEmulator, queue: str) -> None:
    async def main() -> None:
        when = datetime.now(UTC) + timedelta(seconds=30)
        async with (
            AsyncServiceBusClient.from_connection_string(sb.connection_string) as client,
            client.get_queue_sender(queue) as sender,
        ):
            seqs = await sender.schedule_messages(ServiceBusMessage("a"), when)
            await sender.cancel_scheduled_messages(seqs)

    asyncio.run(main())
    assert _count(sb, queue) == 0


def _annotated_messages() -> list[AmqpAnnotatedMessage]:
    return [
        AmqpAnnotatedMessage(
            data_body=[b"aa", b"bb"],
            delivery_annotations={"hop": "value"},
            application_properties={"body_type": "data"},
        ),
        AmqpAnnotatedMessage(
            sequence_body=[b"message", 1.5, True],
            footer={"footer_key": "footer_value"},
            properties={"subject": "sequence"},
            application_properties={"body_type": "sequence"},
        ),
        AmqpAnnotatedMessage(
            value_body={b"key": [-123, b"data", False]},
            header={"priority": 9},
            annotations={"annotation_key": "value"},
            application_properties={"body_type": "value"},
        ),
    ]


def _check_annotated(got: list[ServiceBusReceivedMessage]) -> None:
    by_type = {m.raw_amqp_message.body_type: m.raw_amqp_message for m in got}
    assert list(by_type[AmqpMessageBodyType.DATA].body) == [b"aa", b"bb"]
    assert list(by_type[AmqpMessageBodyType.SEQUENCE].body) == [[b"message", 1.5, True]]
    value = by_type[AmqpMessageBodyType.VALUE]
    assert value.body == {b"key": [-123, b"data", False]}
    assert value.header is not None and value.header.priority == 9


def test_annotated_bodies_sync(client: ServiceBusClient, queue: str) -> None:
    with client.get_queue_sender(queue) as sender:
        for message in _annotated_messages():
            sender.send_messages(message)
    with client.get_queue_receiver(queue) as receiver:
        got = receive(receiver, 3)
        _check_annotated(got)
        for m in got:
            receiver.complete_message(m)


def test_annotated_bodies_async(sb: ServiceBusEmulator, queue: str) -> None:
    async def main() -> None:
        async with AsyncServiceBusClient.from_connection_string(sb.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(_annotated_messages())
            async with client.get_queue_receiver(queue) as receiver:
                got = await _receive_async(receiver, 3)
                _check_annotated(got)
                for m in got:
                    await receiver.complete_message(m)

    asyncio.run(main())


# --- auto lock renewal: the failure callback ---------------------------------------------


def _wait(event: threading.Event, seconds: float = 20.0) -> None:
    assert event.wait(seconds), "the renewal failure callback was not called"


#: Long enough that the renewer's first renewal comes about two seconds after it registers (it
#: renews when less than 3/4 of the lock is left), well after the locks are lost, and that the
#: settlement after the failure still holds an unexpired lock as far as the SDK can tell, so it
#: is the emulator that refuses it.
LOCK = 5.0


def _lost_lock(error: object) -> bool:
    """The renewer's error wraps the lock-lost status the renewal was answered with."""
    return isinstance(getattr(error, "inner_exception", None), MessageLockLostError)


def test_lock_renewal_failure_callback_sync(
    sb: ServiceBusEmulator, client: ServiceBusClient, make_queue: Callable[..., str]
) -> None:
    """A renewal that fails calls ``on_lock_renew_failure`` with the error, and settling then
    raises (the sample forces the failure through a private attribute; we make the emulator
    end the lock, as when it expires). The message comes back with delivery count 1.

    Not by deleting and recreating the queue: a renewal that falls between the two sees no
    entity (a not-found detach or status, as from Service Bus), which the SDK treats as fatal
    and shuts the receiver down, so the test depended on timing."""
    queue = make_queue(lock_duration=LOCK, max_delivery_count=3)
    failures: list[object] = []
    failed = threading.Event()

    def on_failure(renewable: object, error: object) -> None:
        failures.append(error)
        failed.set()

    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("long job"))
    with client.get_queue_receiver(queue) as receiver, AutoLockRenewer() as renewer:
        (m,) = receive(receiver, 1)
        renewer.register(
            receiver, m, max_lock_renewal_duration=60, on_lock_renew_failure=on_failure
        )
        assert sb.expire_locks(queue) == 1
        _wait(failed)
        assert _lost_lock(failures[0]), failures
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(m)
        (again,) = receive(receiver, 1)
        assert (str(again), again.delivery_count) == ("long job", 1)
        receiver.complete_message(again)


def test_lock_renewal_failure_callback_async(
    sb: ServiceBusEmulator, make_queue: Callable[..., str]
) -> None:
    queue = make_queue(lock_duration=LOCK, max_delivery_count=3)

    async def main() -> None:
        failures: list[object] = []
        failed = asyncio.Event()

        async def on_failure(renewable: object, error: object) -> None:
            failures.append(error)
            failed.set()

        async with AsyncServiceBusClient.from_connection_string(sb.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage("long job"))
            async with (
                client.get_queue_receiver(queue) as receiver,
                AsyncAutoLockRenewer() as renewer,
            ):
                (m,) = await _receive_async(receiver, 1)
                renewer.register(
                    receiver, m, max_lock_renewal_duration=60, on_lock_renew_failure=on_failure
                )
                assert await asyncio.to_thread(sb.expire_locks, queue) == 1
                await asyncio.wait_for(failed.wait(), 20)
                assert _lost_lock(failures[0]), failures
                with pytest.raises(MessageLockLostError):
                    await receiver.complete_message(m)
                (again,) = await _receive_async(receiver, 1)
                assert (str(again), again.delivery_count) == ("long job", 1)
                await receiver.complete_message(again)

    asyncio.run(main())


# --- failure and recovery ------------------------------------------------------------------


def test_send_batches_with_retries_then_iterate(sb: ServiceBusEmulator, queue: str) -> None:
    with ServiceBusClient.from_connection_string(sb.connection_string, retry_total=3) as client:
        with client.get_queue_sender(queue) as sender:
            batch = sender.create_message_batch()
            for i in range(10):
                batch.add_message(ServiceBusMessage(f"Data {i}"))
            sender.send_messages(batch)
        seen = []
        with client.get_queue_receiver(queue, max_wait_time=2) as receiver:
            for m in receiver:
                seen.append(str(m))
                receiver.complete_message(m)
    assert sorted(seen) == sorted(f"Data {i}" for i in range(10))
