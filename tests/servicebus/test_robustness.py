"""Errors, concurrency, hostile clients and memory: the emulator must behave like production and
stay up."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from cronwarden.emulators.servicebus.pytest_plugin import ServiceBusEmulator

from .conftest import receive

pytestmark = pytest.mark.azure


def _roundtrip(sb: ServiceBusEmulator, queue: str, body: str) -> None:
    """The emulator still serves: one send + receive + complete."""
    with (
        ServiceBusClient.from_connection_string(sb.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver(queue) as receiver:
            (msg,) = receive(receiver, 1)
            assert str(msg) == body
            receiver.complete_message(msg)


# Production answers the CBS put-token for a missing entity with 404 "The messaging entity … could
# not be found"; the pyamqp-based SDK surfaces that as ServiceBusAuthenticationError (a
# ServiceBusError), before any link is attached. The emulator does the same.
def test_unknown_queue_sync(sb: ServiceBusEmulator) -> None:
    with ServiceBusClient.from_connection_string(sb.connection_string, retry_total=0) as client:
        with (
            pytest.raises(ServiceBusAuthenticationError),
            client.get_queue_sender("no-such-queue") as sender,
        ):
            sender.send_messages(ServiceBusMessage("x"))
        with (
            pytest.raises(ServiceBusAuthenticationError),
            client.get_queue_receiver("no-such-queue") as receiver,
        ):
            receiver.receive_messages(max_wait_time=1)


def test_unknown_queue_async(sb: ServiceBusEmulator) -> None:
    async def main() -> None:
        async with AsyncServiceBusClient.from_connection_string(
            sb.connection_string, retry_total=0
        ) as client:
            with pytest.raises(ServiceBusAuthenticationError):
                async with client.get_queue_sender("no-such-queue") as sender:
                    await sender.send_messages(ServiceBusMessage("x"))

    asyncio.run(main())


def test_concurrent_receivers_never_share_a_locked_message(
    sb: ServiceBusEmulator, make_queue: object
) -> None:
    name = sb.create_queue(lock_duration=60.0)
    total = 200
    with (
        ServiceBusClient.from_connection_string(sb.connection_string) as client,
        client.get_queue_sender(name) as sender,
    ):
        for start in range(0, total, 50):
            sender.send_messages([ServiceBusMessage(str(i)) for i in range(start, start + 50)])
    seen: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with (
                ServiceBusClient.from_connection_string(sb.connection_string) as client,
                client.get_queue_receiver(name) as receiver,
            ):
                idle = 0
                while idle < 2:
                    batch = receiver.receive_messages(max_message_count=7, max_wait_time=1)
                    idle = 0 if batch else idle + 1
                    for msg in batch:
                        with lock:
                            seen.append(msg.sequence_number)
                        receiver.complete_message(msg)
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    sb.delete_queue(name)
    assert not errors
    duplicates = [seq for seq, n in Counter(seen).items() if n > 1]
    assert duplicates == []
    assert sorted(seen) == list(range(1, total + 1))


def _raw(sb: ServiceBusEmulator, payload: bytes, *, read: bool = True) -> None:
    with socket.create_connection((sb.host, sb.port), timeout=5) as sock:
        sock.sendall(payload)
        if read:
            with contextlib.suppress(OSError):
                sock.recv(4096)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http"),
        pytest.param(b"AMQP\x00\x01\x00\x00" + b"\xff" * 64, id="garbage-frame"),
        pytest.param(
            b"AMQP\x00\x01\x00\x00" + struct.pack(">IBBH", 0x7FFFFFFF, 2, 0, 0) + b"\x00" * 8,
            id="huge-frame-size",
        ),
        pytest.param(
            # an "open" performative whose list claims more bytes than the frame has
            b"AMQP\x00\x01\x00\x00"
            + struct.pack(">IBBH", 16, 2, 0, 0)
            + b"\x00\x53\x10\xd0\xff\xff",
            id="truncated-open",
        ),
        pytest.param(b"AMQP\x03\x01\x00\x00" + b"\x00" * 40, id="bad-sasl"),
    ],
)
def test_malformed_input_does_not_take_the_server_down(
    sb: ServiceBusEmulator, queue: str, payload: bytes
) -> None:
    _raw(sb, payload)
    _raw(sb, payload[:5], read=False)  # and a client that hangs up mid-header
    assert sb.process.alive()
    _roundtrip(sb, queue, "still here")


def test_abruptly_killed_client_does_not_take_the_server_down(
    sb: ServiceBusEmulator, queue: str
) -> None:
    # A client that receives (locks) a message and dies without closing anything.
    script = textwrap.dedent(
        f"""
        import os
        from azure.servicebus import ServiceBusClient, ServiceBusMessage
        client = ServiceBusClient.from_connection_string({sb.connection_string!r})
        client.get_queue_sender({queue!r}).send_messages(ServiceBusMessage("orphan"))
        receiver = client.get_queue_receiver({queue!r})
        msgs = receiver.receive_messages(max_message_count=1, max_wait_time=10)
        assert len(msgs) == 1, msgs
        print("locked", flush=True)
        os._exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert "locked" in done.stdout, done.stderr
    assert sb.process.alive()
    # the orphaned lock expires (1 s) and the message is delivered again, count + 1
    with (
        ServiceBusClient.from_connection_string(sb.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        (msg,) = receive(receiver, 1, deadline=10)
        assert str(msg) == "orphan"
        assert msg.delivery_count == 1
        receiver.complete_message(msg)


def test_ten_thousand_1kb_messages_stay_under_100mb_rss(sb: ServiceBusEmulator) -> None:
    name = sb.create_queue()
    body = b"k" * 1024
    try:
        with (
            ServiceBusClient.from_connection_string(sb.connection_string) as client,
            client.get_queue_sender(name) as sender,
        ):
            for _ in range(10_000 // 200):
                batch = sender.create_message_batch()
                for _ in range(200):
                    batch.add_message(ServiceBusMessage(body))
                sender.send_messages(batch)
        counts = {q["name"]: q for q in sb.queues()}[name]
        assert counts["messages"] == 10_000
        rss = sb.rss_bytes()
        print(f"emulator RSS with 10k queued 1 KB messages: {rss / 2**20:.1f} MiB")
        assert rss < 100 * 2**20
    finally:
        sb.delete_queue(name)


def test_session_receiver_is_refused(sb: ServiceBusEmulator, queue: str) -> None:
    from azure.servicebus.exceptions import ServiceBusError

    with ServiceBusClient.from_connection_string(sb.connection_string, retry_total=0) as client:
        receiver = client.get_queue_receiver(queue, session_id="s1")
        with pytest.raises(ServiceBusError):
            receiver.receive_messages(max_wait_time=1)
        receiver.close()


def _raw_transfer(sb: ServiceBusEmulator, queue: str, payload: bytes) -> tuple[str, str | None]:
    """Send ``payload`` as the bytes of one transfer with a bare proton client; the outcome."""
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    class RawSender(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(auto_settle=False)
            self.sent = False
            self.result: tuple[str, str | None] = ("none", None)

        def on_start(self, event: object) -> None:
            container = event.container  # type: ignore[attr-defined]
            conn = container.connect(f"amqp://{sb.host}:{sb.port}", allowed_mechs="ANONYMOUS")
            container.create_sender(conn, queue)

        def on_sendable(self, event: object) -> None:
            if not self.sent:
                self.sent = True
                sender = event.sender  # type: ignore[attr-defined]
                sender.delivery(b"t1")
                sender.stream(payload)
                sender.advance()

        def on_rejected(self, event: object) -> None:
            cond = event.delivery.remote.condition  # type: ignore[attr-defined]
            self.result = ("rejected", cond.name if cond else None)
            event.connection.close()  # type: ignore[attr-defined]

        def on_accepted(self, event: object) -> None:
            self.result = ("accepted", None)
            event.connection.close()  # type: ignore[attr-defined]

    handler = RawSender()
    container = Container(handler)
    container.timeout = 10
    container.run()
    return handler.result


@pytest.mark.parametrize(
    "payload",
    [b"hello", b"\x00\x53\x99\x00\xff", b"\x00\x53\x75\x0a", b"\x00\x53\x75\xb0\xff\xff\xff\xff"],
    ids=["not-amqp", "unknown-section", "bad-constructor", "truncated-binary"],
)
def test_transfer_that_is_not_a_message_is_rejected(
    sb: ServiceBusEmulator, queue: str, payload: bytes
) -> None:
    assert _raw_transfer(sb, queue, payload) == ("rejected", "amqp:decode-error")
    assert sb.process.alive()
    assert _raw_transfer(sb, queue, b"\x00\x53\x75\xa0\x02ok") == ("accepted", None)
    with (
        ServiceBusClient.from_connection_string(sb.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        (msg,) = receive(receiver, 1)
        assert b"".join(msg.body) == b"ok"
        receiver.complete_message(msg)
