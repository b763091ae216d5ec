"""The emulator behaves like Service Bus for client code that is not ours: errors raise (never
hang), concurrent lock renewals keep the connection, limits and keys are enforced."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import (
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
)
from azure.servicebus.aio import AutoLockRenewer as AsyncAutoLockRenewer
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
    ServiceBusError,
)

from cronwarden.emulators.servicebus import EmulatorServer, QueueConfig, default_config
from cronwarden.emulators.servicebus.auth import SasValidator
from cronwarden.emulators.servicebus.pytest_plugin import ServiceBusEmulator

from .conftest import receive

pytestmark = [pytest.mark.azure, pytest.mark.timeout(90)]

#: A send the emulator refuses must raise well within this (it used to hang for ever).
PROMPT = 15.0


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    """An in-process emulator with a small size limit (its logs reach ``caplog``)."""
    srv = EmulatorServer(default_config(), port=0, max_message_size=256 * 1024).start()
    try:
        yield srv
    finally:
        srv.stop()


def _put_queue(srv: EmulatorServer, name: str, **props: float) -> str:
    config = QueueConfig(name, **props)  # type: ignore[arg-type]
    srv.call(lambda: srv.broker.put_queue(config))
    return name


# --- errors raise promptly ----------------------------------------------------------------


def test_send_to_a_queue_deleted_under_the_sender_raises(server: EmulatorServer) -> None:
    name = _put_queue(server, "doomed")
    with (
        ServiceBusClient.from_connection_string(server.connection_string, retry_total=0) as c,
        c.get_queue_sender(name) as sender,
    ):
        sender.send_messages(ServiceBusMessage("before"))
        server.call(lambda: server.broker.delete_queue(name))
        started = time.monotonic()
        with pytest.raises(MessagingEntityNotFoundError):
            sender.send_messages(ServiceBusMessage("after"), timeout=10)
        assert time.monotonic() - started < PROMPT


def test_send_to_a_deleted_queue_raises_async(server: EmulatorServer) -> None:
    name = _put_queue(server, "doomed-async")

    async def main() -> None:
        async with (
            AsyncServiceBusClient.from_connection_string(
                server.connection_string, retry_total=0
            ) as c,
            c.get_queue_sender(name) as sender,
        ):
            await sender.send_messages(ServiceBusMessage("before"))
            server.call(lambda: server.broker.delete_queue(name))
            with pytest.raises(MessagingEntityNotFoundError):
                await asyncio.wait_for(sender.send_messages(ServiceBusMessage("x")), PROMPT)

    asyncio.run(main())


def test_settling_on_a_deleted_queue_raises(server: EmulatorServer) -> None:
    name = _put_queue(server, "doomed-settle")
    with ServiceBusClient.from_connection_string(server.connection_string, retry_total=0) as c:
        with c.get_queue_sender(name) as sender:
            sender.send_messages(ServiceBusMessage("x"))
        with c.get_queue_receiver(name) as receiver:
            (msg,) = receive(receiver, 1)
            server.call(lambda: server.broker.delete_queue(name))
            with pytest.raises(ServiceBusError):
                receiver.complete_message(msg)


def test_a_queue_deleted_and_recreated_keeps_the_links_and_loses_the_locks(
    server: EmulatorServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Locks held on a queue that is deleted and recreated in one step are lost: a renewal on the
    attached ``$management`` link answers lock-lost (``MessageLockLostError``, which leaves the
    receiver usable), so does settling, and the same receiver goes on with the new queue."""
    caplog.set_level(logging.INFO, logger="cronwarden.emulators.servicebus")
    name = _put_queue(server, "phoenix", lock_duration=30.0)

    def recreate() -> None:
        server.broker.delete_queue(name)
        server.broker.put_queue(QueueConfig(name, lock_duration=30.0))

    with ServiceBusClient.from_connection_string(server.connection_string, retry_total=0) as c:
        with c.get_queue_sender(name) as sender:
            sender.send_messages(ServiceBusMessage("old"))
        with c.get_queue_receiver(name) as receiver:
            (old,) = receive(receiver, 1)
            receiver.renew_message_lock(old)  # attaches the $management link
            server.call(recreate)
            with pytest.raises(MessageLockLostError):
                receiver.renew_message_lock(old)
            with pytest.raises(MessageLockLostError):
                receiver.complete_message(old)
            with c.get_queue_sender(name) as sender:
                sender.send_messages(ServiceBusMessage("new"))
            (new,) = receive(receiver, 1)
            assert str(new) == "new"
            receiver.renew_message_lock(new)
            receiver.complete_message(new)
    (state,) = [q for q in server.call(server.broker.describe) if q["name"] == name]
    assert state["messages"] == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_send_the_emulator_refuses_raises(server: EmulatorServer) -> None:
    """Sending to a dead-letter sub-queue is refused (as by Service Bus): the SDK raises."""
    with ServiceBusClient.from_connection_string(server.connection_string, retry_total=0) as c:
        started = time.monotonic()
        with pytest.raises(ServiceBusError), c.get_queue_sender("queue.1/$DeadLetterQueue") as s:
            s.send_messages(ServiceBusMessage("x"), timeout=10)
        assert time.monotonic() - started < PROMPT


# --- message size -------------------------------------------------------------------------


def test_oversize_message_is_refused_with_message_size_exceeded(server: EmulatorServer) -> None:
    name = _put_queue(server, "sizes")
    with (
        ServiceBusClient.from_connection_string(server.connection_string) as c,
        c.get_queue_sender(name) as sender,
    ):
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(ServiceBusMessage(b"x" * (256 * 1024 + 1)), timeout=10)
        sender.send_messages(ServiceBusMessage(b"y" * (200 * 1024)))  # the sender still works
        with c.get_queue_receiver(name) as receiver:
            (got,) = receive(receiver, 1)
            assert len(b"".join(got.body)) == 200 * 1024
            receiver.complete_message(got)
            assert receiver.receive_messages(max_wait_time=1) == []  # the oversize one is gone


def test_oversize_message_is_refused_async(server: EmulatorServer) -> None:
    name = _put_queue(server, "sizes-async")

    async def main() -> None:
        async with (
            AsyncServiceBusClient.from_connection_string(server.connection_string) as c,
            c.get_queue_sender(name) as sender,
        ):
            with pytest.raises(MessageSizeExceededError):
                await asyncio.wait_for(
                    sender.send_messages(ServiceBusMessage(b"x" * 300 * 1024)), PROMPT
                )

    asyncio.run(main())
    assert server.call(lambda: server.broker.describe())[-1]["messages"] == 0


# --- keys ---------------------------------------------------------------------------------


def _wrong_key(connection_string: str) -> str:
    return connection_string.replace("SharedAccessKey=SAS_KEY_VALUE", "SharedAccessKey=nope")


def test_a_wrong_key_cannot_send(sb: ServiceBusEmulator, queue: str) -> None:
    with (
        ServiceBusClient.from_connection_string(
            _wrong_key(sb.connection_string), retry_total=0
        ) as c,
        pytest.raises(ServiceBusAuthenticationError),
        c.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage("x"))
    assert next(q for q in sb.queues() if q["name"] == queue)["messages"] == 0


def test_a_wrong_key_cannot_receive_async(sb: ServiceBusEmulator, queue: str) -> None:
    async def main() -> None:
        async with AsyncServiceBusClient.from_connection_string(
            _wrong_key(sb.connection_string), retry_total=0
        ) as c:
            with pytest.raises(ServiceBusAuthenticationError):
                async with c.get_queue_receiver(queue) as receiver:
                    await receiver.receive_messages(max_wait_time=1)

    asyncio.run(main())


def test_accept_any_key_switch() -> None:
    srv = EmulatorServer(default_config(), port=0, sas=SasValidator(accept_any=True)).start()
    try:
        with (
            ServiceBusClient.from_connection_string(_wrong_key(srv.connection_string)) as c,
            c.get_queue_sender("queue.1") as sender,
        ):
            sender.send_messages(ServiceBusMessage("x"))
    finally:
        srv.stop()


def test_a_configured_key_is_the_one_in_the_connection_string() -> None:
    srv = EmulatorServer(default_config(), port=0, sas=SasValidator(keys={"app": "k3y"})).start()
    try:
        assert "SharedAccessKeyName=app;SharedAccessKey=k3y" in srv.connection_string
        with (
            ServiceBusClient.from_connection_string(srv.connection_string) as c,
            c.get_queue_sender("queue.1") as sender,
        ):
            sender.send_messages(ServiceBusMessage("x"))
    finally:
        srv.stop()


# --- what the SDK writes ------------------------------------------------------------------


def test_annotated_message_with_delivery_annotations(client: ServiceBusClient, queue: str) -> None:
    message = AmqpAnnotatedMessage(
        value_body={"k": 1},
        delivery_annotations={"hop": "x"},
        annotations={"x-opt-custom": "kept"},
        application_properties={"p": "v"},
    )
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(message)
    with client.get_queue_receiver(queue) as receiver:
        (got,) = receive(receiver, 1)
        raw = got.raw_amqp_message
        assert raw.body == {b"k": 1} or raw.body == {"k": 1}
        assert raw.annotations is not None and raw.annotations[b"x-opt-custom"] == b"kept"
        assert got.application_properties == {b"p": b"v"}
        receiver.complete_message(got)


# --- concurrent lock renewal --------------------------------------------------------------

HELD = 10  # messages held at once
LOCK = 5.0  # seconds (slack for renewals on a loaded machine); held for over two lock periods


def _hold_with_renewer_sync(srv: EmulatorServer, name: str) -> list[ServiceBusReceivedMessage]:
    with ServiceBusClient.from_connection_string(srv.connection_string) as c:
        with c.get_queue_sender(name) as sender:
            sender.send_messages([ServiceBusMessage(str(i)) for i in range(HELD)])
        with (
            c.get_queue_receiver(name, prefetch_count=HELD) as receiver,
            AutoLockRenewer(max_workers=8) as renewer,
        ):
            held = receive(receiver, HELD)
            assert len(held) == HELD
            for msg in held:
                renewer.register(receiver, msg, max_lock_renewal_duration=60)
            _sleep_past_two_locks()
            for msg in held:
                # Checked before settling: a renewal still in flight when the message is completed
                # is answered lock-lost (the message is gone), as by Service Bus.
                assert msg.auto_renew_error is None
                receiver.complete_message(msg)  # raises MessageLockLostError if a renewal was lost
            assert receiver.receive_messages(max_message_count=HELD, max_wait_time=1) == []
            return held


def _sleep_past_two_locks() -> None:
    # Not synchronisation: the point is to outlive the lock, so wall time is the subject here.
    time.sleep(2 * LOCK + 1)


def test_auto_lock_renewer_with_many_messages_sync(server: EmulatorServer) -> None:
    name = _put_queue(server, "renew-sync", lock_duration=LOCK)
    assert len(_hold_with_renewer_sync(server, name)) == HELD
    assert server.call(lambda: server.broker.describe())[-1]["messages"] == 0


def test_auto_lock_renewer_with_many_messages_async(server: EmulatorServer) -> None:
    name = _put_queue(server, "renew-async", lock_duration=LOCK)

    async def main() -> None:
        async with AsyncServiceBusClient.from_connection_string(server.connection_string) as c:
            async with c.get_queue_sender(name) as sender:
                await sender.send_messages([ServiceBusMessage(str(i)) for i in range(HELD)])
            async with (
                c.get_queue_receiver(name, prefetch_count=HELD) as receiver,
                AsyncAutoLockRenewer() as renewer,
            ):
                held: list[ServiceBusReceivedMessage] = []
                end = time.monotonic() + 10
                while len(held) < HELD and time.monotonic() < end:
                    held += await receiver.receive_messages(HELD - len(held), max_wait_time=1)
                assert len(held) == HELD
                for msg in held:
                    renewer.register(receiver, msg, max_lock_renewal_duration=60)
                await asyncio.sleep(2 * LOCK + 1)  # outlive the lock (see _sleep_past_two_locks)
                for msg in held:
                    assert msg.auto_renew_error is None  # before settling (see the sync test)
                    await receiver.complete_message(msg)

    asyncio.run(main())
    assert server.call(lambda: server.broker.describe())[-1]["messages"] == 0


def test_concurrent_renewals_from_threads_keep_the_connection(
    server: EmulatorServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Many threads renewing on one receiver: the SDK sends duplicate delivery-ids; the
    connection must survive (no 'sequencing error') and every renewal must answer."""
    import concurrent.futures

    name = _put_queue(server, "renew-threads", lock_duration=30.0)
    caplog.set_level(logging.INFO, logger="cronwarden.emulators.servicebus")
    with ServiceBusClient.from_connection_string(server.connection_string) as c:
        with c.get_queue_sender(name) as sender:
            sender.send_messages([ServiceBusMessage(str(i)) for i in range(HELD)])
        with c.get_queue_receiver(name, prefetch_count=HELD) as receiver:
            held = receive(receiver, HELD)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                renewed = list(pool.map(receiver.renew_message_lock, held * 10))
            assert len(renewed) == HELD * 10
            for msg in held:
                receiver.complete_message(msg)
    assert not [r for r in caplog.records if "sequencing error" in r.getMessage()]


def test_client_close_is_clean(server: EmulatorServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cronwarden.emulators.servicebus")
    with ServiceBusClient.from_connection_string(server.connection_string) as c:
        with c.get_queue_sender("queue.1") as sender:
            sender.send_messages(ServiceBusMessage("x"))
        with c.get_queue_receiver("queue.1") as receiver:
            (msg,) = receive(receiver, 1)
            receiver.renew_message_lock(msg)  # opens the management link pyamqp detaches late
            receiver.complete_message(msg)
    deadline = time.monotonic() + 10
    while server.open_links() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.open_links() == 0
    assert not [r for r in caplog.records if "no such channel" in r.getMessage()]


# --- AMQP over WebSockets -------------------------------------------------------------------


def test_amqp_over_websocket_sync(server: EmulatorServer) -> None:
    """``transport_type=AmqpOverWebsocket`` to ``custom_endpoint_address`` (the SDK drops the
    emulator's port from the WebSocket URL otherwise and dials 80)."""
    pytest.importorskip(
        "websocket", reason="the SDK's sync WebSocket transport needs websocket-client"
    )
    from azure.servicebus import TransportType

    name = _put_queue(server, "over-ws")
    with ServiceBusClient.from_connection_string(
        server.connection_string,
        transport_type=TransportType.AmqpOverWebsocket,
        custom_endpoint_address=f"sb://{server.host}:{server.port}",
        retry_total=0,
    ) as c:
        with c.get_queue_sender(name) as sender:
            sender.send_messages([ServiceBusMessage(f"ws-{i}") for i in range(3)])
            sender.send_messages(ServiceBusMessage(b"w" * 200_000))  # many frames each way
        with c.get_queue_receiver(name) as receiver:
            got = receive(receiver, 4)
            assert sorted(len(b"".join(m.body)) for m in got) == [4, 4, 4, 200_000]
            for m in got:
                receiver.complete_message(m)
    assert server.call(lambda: server.broker.describe())[-1]["messages"] == 0


def test_amqp_over_websocket_async(server: EmulatorServer) -> None:
    pytest.importorskip("aiohttp", reason="the SDK's async WebSocket transport needs aiohttp")
    from azure.servicebus import TransportType

    name = _put_queue(server, "over-ws-async")

    async def main() -> None:
        async with AsyncServiceBusClient.from_connection_string(
            server.connection_string,
            transport_type=TransportType.AmqpOverWebsocket,
            custom_endpoint_address=f"sb://{server.host}:{server.port}",
            retry_total=0,
        ) as c:
            async with c.get_queue_sender(name) as sender:
                await sender.send_messages(ServiceBusMessage("ws"))
            async with c.get_queue_receiver(name) as receiver:
                got = await receiver.receive_messages(max_wait_time=5)
                assert [str(m) for m in got] == ["ws"]
                await receiver.complete_message(got[0])

    asyncio.run(main())
