"""Unit tests of the section codec and the broker (no sockets, fake clock)."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("proton")

from cronwarden.emulators.servicebus import codec
from cronwarden.emulators.servicebus.broker import Broker, BrokerError
from cronwarden.emulators.servicebus.config import EmulatorConfig, QueueConfig

pytestmark = pytest.mark.azure

BODY = b"\x00\x53\x75\xa0\x02hi"
PROPS = b"\x00\x53\x73\xc0\x05\x01\xa1\x02id"  # properties list: message-id "id"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _broker(**props: object) -> tuple[Broker, Clock]:
    clock = Clock()
    queue = QueueConfig("q", **props)  # type: ignore[arg-type]
    return Broker(EmulatorConfig(queues={"q": queue}), clock=clock), clock


def _data(inner: bytes) -> bytes:
    return b"\x00\x53\x75\xb0" + len(inner).to_bytes(4, "big") + inner


def test_parse_keeps_sender_bytes() -> None:
    parsed = codec.parse_message(PROPS + BODY)
    assert parsed.message_id == "id"
    assert parsed.props == PROPS
    assert parsed.body == BODY


def test_batch_envelope_is_split_and_plain_messages_are_not() -> None:
    envelope = PROPS + _data(PROPS + BODY) + _data(BODY)
    assert codec.split_batch(envelope) == [PROPS + BODY, BODY]
    assert codec.split_batch(PROPS + BODY) is None
    assert codec.split_batch(_data(b"just bytes")) is None


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x53\x75\xa0\x09short", b"\x00\x53\x70\xc0"])
def test_malformed_messages_raise_codec_error(raw: bytes) -> None:
    with pytest.raises(codec.CodecError):
        codec.parse_message(raw)


def test_rendered_message_round_trips_through_proton() -> None:
    from proton import Message

    broker, _ = _broker()
    sub = broker.resolve("q")
    assert sub is not None
    broker.enqueue(sub, PROPS + BODY)
    got = broker.acquire(sub, peek_lock=True)
    assert got is not None
    msg, raw = got
    decoded = Message()
    decoded.decode(raw)
    assert decoded.id == "id"
    assert decoded.body == b"hi"
    assert decoded.annotations["x-opt-sequence-number"] == msg.seq == 1
    assert decoded.delivery_count == 0


def test_lock_expiry_then_max_delivery_count() -> None:
    broker, clock = _broker(lock_duration=1.0, max_delivery_count=2)
    sub = broker.resolve("q")
    assert sub is not None
    broker.enqueue(sub, BODY)
    for attempt in range(2):
        got = broker.acquire(sub, peek_lock=True)
        assert got is not None and got[0].delivery_count == attempt
        clock.now += 1.01
        broker.tick()
    assert broker.acquire(sub, peek_lock=True) is None
    dlq = broker.resolve("q/$DeadLetterQueue")
    assert dlq is not None
    dead = broker.acquire(dlq, peek_lock=False)
    assert dead is not None and b"MaxDeliveryCountExceeded" in dead[1]


def test_settling_with_an_unknown_token_is_lock_lost() -> None:
    broker, _ = _broker()
    sub = broker.resolve("q")
    assert sub is not None
    with pytest.raises(BrokerError) as lost:
        broker.complete(sub, uuid.uuid4())
    assert lost.value.condition == "com.microsoft:message-lock-lost"


def test_sending_to_the_dead_letter_queue_is_refused() -> None:
    broker, _ = _broker()
    dlq = broker.resolve("Q/$deadletterqueue")
    assert dlq is not None
    with pytest.raises(BrokerError):
        broker.enqueue(dlq, BODY)


def test_expire_locks_ends_every_lock_as_lock_expiry_does() -> None:
    broker, _ = _broker(lock_duration=60.0, max_delivery_count=2)
    sub = broker.resolve("q")
    assert sub is not None
    broker.enqueue(sub, BODY)
    got = broker.acquire(sub, peek_lock=True)
    assert got is not None and got[0].lock_token is not None
    token = got[0].lock_token
    assert broker.expire_locks("Q") == 1
    for settle in (broker.renew, broker.complete):
        with pytest.raises(BrokerError) as lost:
            settle(sub, token)
        assert lost.value.condition == "com.microsoft:message-lock-lost"
    again = broker.acquire(sub, peek_lock=True)
    assert again is not None and again[0].delivery_count == 1
    assert broker.expire_locks("q") == 1  # the second failed attempt dead-letters it
    assert broker.acquire(sub, peek_lock=True) is None
    assert sub.queue.dlq.counts()["messages"] == 1
    assert broker.expire_locks("q") == 0
    with pytest.raises(KeyError):
        broker.expire_locks("no-such-queue")
