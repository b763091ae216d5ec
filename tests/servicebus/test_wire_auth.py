"""Unit tests (no server, no SDK): delivery-id repair on the wire and SAS token checks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from urllib.parse import quote, quote_plus, urlencode

import pytest

pytest.importorskip("proton")

from cronwarden.emulators.servicebus.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, SasValidator
from cronwarden.emulators.servicebus.wire import DeliveryIdRepair

# --- frames as pyamqp writes them ---------------------------------------------------------


def _uint(value: int) -> bytes:
    return b"\x70" + struct.pack(">I", value)


def _frame(channel: int, code: int, fields: list[bytes], payload: bytes = b"") -> bytes:
    body = b"".join(fields)
    perf = b"\x00\x53" + bytes((code, 0xC0, len(body) + 1, len(fields))) + body
    rest = perf + payload
    return struct.pack(">IBBH", 8 + len(rest), 2, 0, channel) + rest


def _begin(channel: int, next_outgoing_id: int = 0) -> bytes:
    return _frame(channel, 0x11, [b"\x40", _uint(next_outgoing_id), _uint(100), _uint(100)])


def _end(channel: int) -> bytes:
    return _frame(channel, 0x17, [])


def _detach(channel: int, handle: int) -> bytes:
    return _frame(channel, 0x16, [_uint(handle), b"\x41"])


def _transfer(channel: int, handle: int, delivery_id: int | None, *, more: bool = False) -> bytes:
    fields = [
        _uint(handle),
        b"\x40" if delivery_id is None else _uint(delivery_id),
        b"\xa0\x01t",
        _uint(0),
        b"\x42",
        b"\x41" if more else b"\x42",
    ]
    return _frame(channel, 0x14, fields, payload=b"\x00\x53\x77\xa1\x02hi")


def _delivery_ids(stream: bytes) -> list[int | None]:
    """Delivery-ids of the transfer frames in ``stream`` (as the test builds them)."""
    ids: list[int | None] = []
    pos = 0
    while pos < len(stream):
        if stream[pos : pos + 4] == b"AMQP":
            pos += 8
            continue
        size = struct.unpack_from(">I", stream, pos)[0]
        frame = stream[pos : pos + size]
        if frame[10] == 0x14:
            list_at = 11
            head = 3 if frame[list_at] == 0xC0 else 9
            at = list_at + head + 5  # past the handle (uint, 5 bytes)
            ids.append(None if frame[at] == 0x40 else struct.unpack_from(">I", frame, at + 1)[0])
        pos += size
    return ids


def _feed_in_pieces(repair: DeliveryIdRepair, data: bytes, piece: int) -> bytes:
    return b"".join(repair.feed(data[i : i + piece]) for i in range(0, len(data), piece))


def test_duplicate_delivery_ids_become_the_ids_proton_expects() -> None:
    # What two threads renewing locks at once produce: 0, 1, 1, then 3 (the client counted both).
    stream = (
        b"AMQP\x00\x01\x00\x00" + _begin(1) + b"".join(_transfer(1, 4, i) for i in (0, 1, 1, 3, 4))
    )
    repair = DeliveryIdRepair()
    out = _feed_in_pieces(repair, stream, 7)
    assert _delivery_ids(out) == [0, 1, 2, 3, 4]
    assert repair.repaired == 1


def test_in_sequence_traffic_passes_through_byte_for_byte() -> None:
    stream = _begin(0, next_outgoing_id=10) + b"".join(_transfer(0, 1, i) for i in range(10, 20))
    repair = DeliveryIdRepair()
    assert _feed_in_pieces(repair, stream, 5) == stream
    assert repair.repaired == 0


def test_continuation_frames_keep_their_delivery_id() -> None:
    stream = (
        _begin(1)
        + _transfer(1, 2, 0)
        + _transfer(1, 3, 0, more=True)  # duplicate id, first frame of a two-frame delivery
        + _transfer(1, 3, 0)  # its continuation repeats the id
        + _transfer(1, 2, 2)
    )
    out = DeliveryIdRepair().feed(stream)
    assert _delivery_ids(out) == [0, 1, 1, 2]


def test_sessions_are_tracked_per_channel() -> None:
    stream = _begin(1) + _begin(2, 5) + _transfer(1, 0, 0) + _transfer(2, 0, 5) + _transfer(2, 0, 5)
    assert _delivery_ids(DeliveryIdRepair().feed(stream)) == [0, 5, 6]


def test_frames_after_a_session_end_are_dropped_until_the_channel_begins_again() -> None:
    stream = _begin(1) + _end(1) + _detach(1, 4) + _begin(1, 7) + _transfer(1, 0, 7)
    repair = DeliveryIdRepair()
    out = repair.feed(stream)
    assert out == _begin(1) + _end(1) + _begin(1, 7) + _transfer(1, 0, 7)
    assert repair.dropped == 1


def test_unparseable_bytes_pass_through_and_stop_the_repair() -> None:
    repair = DeliveryIdRepair()
    junk = b"\x00\x00\x00\x03garbage"
    assert repair.feed(junk) == junk
    assert repair.feed(b"more") == b"more"


def test_only_complete_frames_are_released() -> None:
    frame = _begin(0)
    repair = DeliveryIdRepair()
    assert repair.feed(frame[:-1]) == b""
    assert repair.feed(frame[-1:]) == frame


# --- SAS tokens ----------------------------------------------------------------------------

AUDIENCE = "sb://127.0.0.1:5672/queue.1"


def _sdk_token(audience: str, key_name: str, key: str, expiry: int) -> str:
    """The shape the SDK writes: sr URL-encoded, signed as written."""
    encoded = quote_plus(audience)
    sig = base64.b64encode(
        hmac.new(key.encode(), f"{encoded}\n{expiry}".encode(), hashlib.sha256).digest()
    )
    return "SharedAccessSignature " + urlencode(
        {"sr": audience, "sig": sig, "se": str(expiry), "skn": key_name}
    )


def _raw_token(audience: str, key_name: str, key: str, expiry: int) -> str:
    """The shape of Microsoft's hand-written sample: sr raw, signed raw."""
    sig = base64.b64encode(
        hmac.new(key.encode(), f"{audience}\n{expiry}".encode(), hashlib.sha256).digest()
    )
    return f"SharedAccessSignature sr={audience}&sig={quote(sig)}&se={expiry}&skn={key_name}"


NOW = 1_800_000_000.0


def _validator(**kwargs: object) -> SasValidator:
    return SasValidator(clock=lambda: NOW, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [_sdk_token, _raw_token])
def test_tokens_signed_with_the_key_are_accepted(make: object) -> None:
    token = make(AUDIENCE, DEFAULT_KEY_NAME, DEFAULT_KEY, int(NOW) + 60)  # type: ignore[operator]
    assert _validator().check(token, AUDIENCE) is None


def test_a_namespace_wide_token_covers_every_entity() -> None:
    token = _sdk_token("sb://localhost:5672/", DEFAULT_KEY_NAME, DEFAULT_KEY, int(NOW) + 60)
    assert _validator().check(token, AUDIENCE) is None
    assert _validator().check(token, AUDIENCE + "/$management") is None


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (_sdk_token(AUDIENCE, DEFAULT_KEY_NAME, "WRONG", int(NOW) + 60), "InvalidSignature"),
        (_sdk_token(AUDIENCE, "OtherPolicy", DEFAULT_KEY, int(NOW) + 60), "no shared access key"),
        (_sdk_token(AUDIENCE, DEFAULT_KEY_NAME, DEFAULT_KEY, int(NOW) - 1), "ExpiredToken"),
        (_sdk_token("sb://h/queue.2", DEFAULT_KEY_NAME, DEFAULT_KEY, int(NOW) + 60), "Audience"),
        ("eyJhbGciOiJSUzI1NiJ9.e30.sig", "shared access signatures only"),
        ("SharedAccessSignature sr=x&se=1", "lacks"),
    ],
)
def test_bad_tokens_are_refused_with_a_reason(token: str, reason: str) -> None:
    refusal = _validator().check(token, AUDIENCE)
    assert refusal is not None and reason in refusal
    assert DEFAULT_KEY not in refusal


def test_accept_any_skips_every_check() -> None:
    assert _validator(accept_any=True).check("anything", AUDIENCE) is None


def test_configured_keys_replace_the_default() -> None:
    validator = _validator(keys={"app": "s3cret"})
    assert validator.check(_sdk_token(AUDIENCE, "app", "s3cret", int(NOW) + 9), AUDIENCE) is None
    assert validator.check(
        _sdk_token(AUDIENCE, DEFAULT_KEY_NAME, DEFAULT_KEY, int(NOW) + 9), AUDIENCE
    )


# --- WebSocket framing ------------------------------------------------------------------------


def _client_frame(opcode: int, payload: bytes, mask: bytes = b"\x01\x02\x03\x04") -> bytes:
    n = len(payload)
    head = bytes((0x80 | opcode,)) + (
        bytes((0x80 | n,)) if n < 126 else b"\xfe" + struct.pack(">H", n)
    )
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


HANDSHAKE = (
    b"GET /$servicebus/websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Protocol: AMQPWSB10\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def test_websocket_handshake_then_binary_messages_in_any_chunking() -> None:
    from cronwarden.emulators.servicebus.websocket import WebSocketServer, looks_like_http

    assert looks_like_http(b"GE") is None
    assert looks_like_http(b"AMQP") is False
    assert looks_like_http(HANDSHAKE[:8]) is True
    ws = WebSocketServer()
    stream = HANDSHAKE + _client_frame(2, b"AMQP\x03\x01\x00\x00") + _client_frame(2, b"x" * 300)
    amqp, reply = b"", b""
    for i in range(0, len(stream), 5):
        got, back = ws.feed(stream[i : i + 5])
        amqp, reply = amqp + got, reply + back
    assert amqp == b"AMQP\x03\x01\x00\x00" + b"x" * 300
    # RFC 6455's example key and accept value
    assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in reply
    assert b"Sec-WebSocket-Protocol: AMQPWSB10" in reply
    assert WebSocketServer.wrap(b"abc") == b"\x82\x03abc"


def test_websocket_ping_close_and_bad_handshake() -> None:
    from cronwarden.emulators.servicebus.websocket import WebSocketServer

    ws = WebSocketServer()
    ws.feed(HANDSHAKE)
    amqp, reply = ws.feed(_client_frame(9, b"hi") + _client_frame(8, b"\x03\xe8"))
    assert amqp == b""
    assert reply == b"\x8a\x02hi" + b"\x88\x02\x03\xe8"
    assert ws.closed
    bad = WebSocketServer()
    _, reply = bad.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400") and bad.closed
