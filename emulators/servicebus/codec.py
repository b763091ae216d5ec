"""AMQP 1.0 message encoding at the level of sections, without re-encoding what we don't touch.

A message on the wire is a sequence of described sections (header 0x70, delivery annotations
0x71, message annotations 0x72, properties 0x73, application properties 0x74, body 0x75-0x77,
footer 0x78). The broker keeps the sender's bytes for properties, application properties and
body verbatim (byte-exact round trips), decodes the few fields it needs (TTL, message id,
scheduled enqueue time), and on delivery writes a fresh header and message annotations in front.

Contracts:

* :func:`parse_message` raises :class:`CodecError` (never another exception) on malformed input.
* :func:`encode_header` / :func:`encode_annotation_entries` produce valid AMQP encodings of the
  few value types the broker emits (bool, ubyte, uint, long, int, timestamp, symbol, string).
* :func:`split_batch` recognises the Service Bus batch envelope (message format 0x80013700 on the
  wire). python-qpid-proton does not expose a transfer's message format, so the envelope is
  recognised by shape: no header, no application properties, and a body of one or more data
  sections each of which is itself a complete AMQP message.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any, cast

from proton import Data, Described, ulong

HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
SEQUENCE = 0x76
VALUE = 0x77
FOOTER = 0x78

_SYMBOLIC = {
    b"amqp:header:list": HEADER,
    b"amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    b"amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    b"amqp:properties:list": PROPERTIES,
    b"amqp:application-properties:map": APPLICATION_PROPERTIES,
    b"amqp:data:binary": DATA,
    b"amqp:amqp-sequence:list": SEQUENCE,
    b"amqp:amqp-value:*": VALUE,
    b"amqp:footer:map": FOOTER,
}
_FIXED_WIDTH = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}
_MAX_DEPTH = 64


class CodecError(ValueError):
    """Bytes that are not a valid AMQP encoding of what was expected."""


def skip_value(buf: bytes, pos: int, depth: int = 0) -> int:
    """The offset just past the encoded value starting at ``pos``."""
    if depth > _MAX_DEPTH:
        raise CodecError("nesting too deep")
    try:
        code = buf[pos]
    except IndexError:
        raise CodecError("truncated value") from None
    pos += 1
    if code == 0x00:  # described: descriptor, then value
        pos = skip_value(buf, pos, depth + 1)
        return skip_value(buf, pos, depth + 1)
    high = code >> 4
    if high in _FIXED_WIDTH:
        end = pos + _FIXED_WIDTH[high]
    elif high in (0xA, 0xC, 0xE):
        if pos >= len(buf):
            raise CodecError("truncated size")
        end = pos + 1 + buf[pos]
    elif high in (0xB, 0xD, 0xF):
        if pos + 4 > len(buf):
            raise CodecError("truncated size")
        end = pos + 4 + struct.unpack_from(">I", buf, pos)[0]
    else:
        raise CodecError(f"unknown type constructor 0x{code:02x}")
    if end > len(buf):
        raise CodecError("truncated value")
    return end


def _section_code(buf: bytes, pos: int) -> tuple[int, int]:
    """(section code, offset of the section's value) for a section starting at ``pos``."""
    if buf[pos] != 0x00:
        raise CodecError("a message section must be a described type")
    ctor = buf[pos + 1] if pos + 1 < len(buf) else -1
    if ctor == 0x53 and pos + 2 < len(buf):
        return buf[pos + 2], pos + 3
    if ctor == 0x80 and pos + 9 < len(buf):
        return struct.unpack_from(">Q", buf, pos + 2)[0], pos + 10
    if ctor in (0xA3, 0xB3):
        end = skip_value(buf, pos + 1)
        head = 3 if ctor == 0xA3 else 6
        name = bytes(buf[pos + head : end])
        if name in _SYMBOLIC:
            return _SYMBOLIC[name], end
    raise CodecError("unknown message section descriptor")


def split_sections(buf: bytes) -> list[tuple[int, int, int]]:
    """``(code, start, end)`` for each section, in order; the whole buffer must be consumed."""
    sections: list[tuple[int, int, int]] = []
    pos = 0
    last = 0
    while pos < len(buf):
        code, value_at = _section_code(buf, pos)
        if not HEADER <= code <= FOOTER:
            raise CodecError(f"unknown message section 0x{code:x}")
        end = skip_value(buf, value_at)
        sections.append((code, pos, end))
        pos = end
        if code == DELIVERY_ANNOTATIONS:
            # pyamqp writes delivery annotations last (after the footer); they are hop-by-hop
            # and dropped by the broker, so their position is accepted wherever it is.
            continue
        if code < last or (code == last and code not in (DATA, SEQUENCE)):
            raise CodecError("message sections out of order")
        last = code
    if not sections:
        raise CodecError("empty message")
    return sections


def decode(raw: bytes) -> Any:
    """Decode one encoded AMQP value with proton (sections decode to ``proton.Described``)."""
    data = Data()
    try:
        data.decode(raw)
        data.rewind()
        data.next()
        return data.get_object()
    except Exception as exc:  # proton raises DataException and friends
        raise CodecError(f"undecodable value: {exc}") from None


def encode(value: Any) -> bytes:
    """Encode a Python/proton value with proton."""
    data = Data()
    data.put_object(value)
    encoded: bytes = data.encode()
    return encoded


def _section_value(raw: bytes) -> Any:
    described = decode(raw)
    return getattr(described, "value", None)


@dataclass(slots=True)
class ParsedMessage:
    """One message split for storage. ``props``/``app_props``/``body`` are the sender's bytes."""

    durable: bool | None
    priority: int | None
    ttl_ms: int | None
    annotations: dict[Any, Any]
    props: bytes
    app_props: bytes
    body: bytes
    message_id: Any


def parse_message(raw: bytes) -> ParsedMessage:
    """Split ``raw`` into the parts the broker stores. Delivery annotations are dropped."""
    sections = split_sections(raw)
    durable = priority = ttl = None
    annotations: dict[Any, Any] = {}
    props = app_props = b""
    body_parts: list[bytes] = []
    message_id: Any = None
    for code, start, end in sections:
        if code == HEADER:
            fields = _section_value(raw[start:end]) or []
            fields = list(fields) + [None] * 5
            durable, priority, ttl = fields[0], fields[1], fields[2]
        elif code == MESSAGE_ANNOTATIONS:
            value = _section_value(raw[start:end])
            if isinstance(value, dict):
                annotations = value
        elif code == PROPERTIES:
            props = raw[start:end]
            fields = _section_value(props) or []
            message_id = fields[0] if fields else None
        elif code == APPLICATION_PROPERTIES:
            app_props = raw[start:end]
        elif code >= DATA:
            body_parts.append(raw[start:end])  # body sections and the footer
    if not any(DATA <= code <= VALUE for code, _, _ in sections):
        raise CodecError("message has no body")
    return ParsedMessage(
        durable=bool(durable) if durable is not None else None,
        priority=int(priority) if priority is not None else None,
        ttl_ms=int(ttl) if ttl is not None else None,
        annotations=annotations,
        props=props,
        app_props=app_props,
        body=b"".join(body_parts),
        message_id=message_id,
    )


def split_batch(raw: bytes) -> list[bytes] | None:
    """The inner messages of a batch envelope, or None when ``raw`` is an ordinary message."""
    try:
        sections = split_sections(raw)
    except CodecError:
        return None
    codes = [code for code, _, _ in sections]
    if HEADER in codes or APPLICATION_PROPERTIES in codes or DATA not in codes:
        return None
    inner: list[bytes] = []
    for code, start, end in sections:
        if code in (MESSAGE_ANNOTATIONS, PROPERTIES, DELIVERY_ANNOTATIONS):
            continue
        if code != DATA:
            return None
        value_at = _section_code(raw, start)[1]
        payload = _binary_payload(raw, value_at, end)
        if payload is None:
            return None
        try:
            inner_codes = [c for c, _, _ in split_sections(payload)]
        except CodecError:
            return None
        if not any(c >= DATA and c != FOOTER for c in inner_codes):
            return None
        inner.append(payload)
    return inner


def _binary_payload(buf: bytes, pos: int, end: int) -> bytes | None:
    ctor = buf[pos]
    if ctor == 0xA0:
        return buf[pos + 2 : end]
    if ctor == 0xB0:
        return buf[pos + 5 : end]
    return None


# --- encoding of the few values the broker writes itself ----------------------------------


def _uint(value: int) -> bytes:
    if value == 0:
        return b"\x43"
    if value < 256:
        return b"\x52" + bytes((value,))
    return b"\x70" + struct.pack(">I", value & 0xFFFFFFFF)


def enc_long(value: int) -> bytes:
    if -128 <= value <= 127:
        return b"\x55" + struct.pack(">b", value)
    return b"\x81" + struct.pack(">q", value)


def enc_int(value: int) -> bytes:
    if -128 <= value <= 127:
        return b"\x54" + struct.pack(">b", value)
    return b"\x71" + struct.pack(">i", value)


def enc_timestamp(ms: int) -> bytes:
    return b"\x83" + struct.pack(">q", ms)


def enc_symbol(text: str) -> bytes:
    raw = text.encode("ascii")
    if len(raw) < 256:
        return b"\xa3" + bytes((len(raw),)) + raw
    return b"\xb3" + struct.pack(">I", len(raw)) + raw


def enc_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) < 256:
        return b"\xa1" + bytes((len(raw),)) + raw
    return b"\xb1" + struct.pack(">I", len(raw)) + raw


def enc_uuid(value: uuid.UUID) -> bytes:
    return b"\x98" + value.bytes


def _compound(small: int, large: int, count: int, body: bytes) -> bytes:
    if count == 0 and small == 0xC0:
        return b"\x45"
    if len(body) + 1 < 256 and count < 256:
        return bytes((small, len(body) + 1, count)) + body
    return bytes((large,)) + struct.pack(">II", len(body) + 4, count) + body


def encode_header(
    *, durable: bool | None, priority: int | None, ttl_ms: int | None, delivery_count: int
) -> bytes:
    """The header section (0x70) with ``delivery-count`` set (first-acquirer left unset)."""
    fields = [
        b"\x40" if durable is None else (b"\x41" if durable else b"\x42"),
        b"\x40" if priority is None else b"\x50" + bytes((priority & 0xFF,)),
        b"\x40" if ttl_ms is None else _uint(ttl_ms),
        b"\x40",
        _uint(delivery_count),
    ]
    return b"\x00\x53\x70" + _compound(0xC0, 0xD0, len(fields), b"".join(fields))


def encode_annotation_entries(annotations: dict[Any, Any]) -> tuple[int, bytes]:
    """(element count, encoded keys and values) of a map, to merge with broker entries later.

    The sender's annotations keep their AMQP types (proton round-trips them).
    """
    if not annotations:
        return 0, b""
    encoded = encode(annotations)
    # proton encodes maps as map32 (0xd1, size, count) or map8 (0xc1, size, count).
    if encoded[0] == 0xD1:
        return struct.unpack_from(">I", encoded, 5)[0], encoded[9:]
    if encoded[0] == 0xC1:
        return encoded[2], encoded[3:]
    raise CodecError("annotations did not encode as a map")


def encode_annotations(entries: list[bytes], pre_count: int = 0, pre: bytes = b"") -> bytes:
    """The message-annotations section (0x72): ``pre`` (``pre_count`` map elements, i.e. twice
    the pairs) followed by ``entries`` (already encoded key, value, key, value …)."""
    body = pre + b"".join(entries)
    return b"\x00\x53\x72" + _compound(0xC1, 0xD1, pre_count + len(entries), body)


def encode_string_map_section(code: int, entries: dict[str, Any]) -> bytes:
    """A described map section (e.g. application properties) encoded by proton."""
    return encode(Described(ulong(code), cast(Any, entries)))
