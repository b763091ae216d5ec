"""AMQP over WebSockets (RFC 6455, subprotocol ``AMQPWSB10``) on the AMQP port, sans I/O.

The SDK's ``transport_type=AmqpOverWebsocket`` (also implied by ``http_proxy``) opens
``ws://host:port/$servicebus/websocket`` and then carries the AMQP byte stream in binary
messages. A connection whose first bytes are ``GET `` is such a client; anything else is plain
AMQP.

Contract: :class:`WebSocketServer` turns the client's bytes into (AMQP bytes for proton, bytes
to send back): the 101 handshake answer, pongs and the close echo. :meth:`wrap` frames the
server's AMQP bytes as one unmasked binary message. A malformed handshake is answered with 400
and :attr:`closed` is set; so is a close frame from the client.
"""

from __future__ import annotations

import base64
import hashlib
import struct

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
SUBPROTOCOL = "AMQPWSB10"
_MAX_HEADER = 16 * 1024
_CONTINUATION, _TEXT, _BINARY, _CLOSE, _PING, _PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def looks_like_http(prefix: bytes) -> bool | None:
    """True for ``GET ``, False for anything else, None while too short to tell."""
    if len(prefix) < 4:
        return None if b"GET "[: len(prefix)] == prefix else False
    return prefix[:4] == b"GET "


def _unmask(payload: bytes, mask: bytes) -> bytes:
    if not payload:
        return payload
    n = len(payload)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, unmasked frame (servers never mask)."""
    n = len(payload)
    if n < 126:
        head = struct.pack(">BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack(">BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
    return head + payload


class WebSocketServer:
    """One connection's WebSocket state (see the module docstring)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.open = False
        self.closed = False

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """(AMQP bytes received, bytes to send back) for ``data`` from the client."""
        self._buf += data
        if self.closed:
            self._buf.clear()
            return b"", b""
        reply = b""
        if not self.open:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > _MAX_HEADER:
                    self.closed = True
                    return b"", _http(400, "Bad Request")
                return b"", b""
            head = bytes(self._buf[:end]).decode("latin-1")
            del self._buf[: end + 4]
            reply = self._handshake(head)
            if not self.open:
                return b"", reply
        amqp = bytearray()
        while not self.closed:
            parsed = self._next_frame()
            if parsed is None:
                break
            opcode, payload = parsed
            if opcode in (_BINARY, _CONTINUATION, _TEXT):
                amqp += payload
            elif opcode == _PING:
                reply += frame(_PONG, payload)
            elif opcode == _CLOSE:
                reply += frame(_CLOSE, payload[:2])
                self.closed = True
        return bytes(amqp), reply

    def _handshake(self, head: str) -> bytes:
        lines = head.split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        key = headers.get("sec-websocket-key")
        if "websocket" not in headers.get("upgrade", "").lower() or not key:
            self.closed = True
            return _http(400, "Bad Request")
        accept = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()  # noqa: S324 - RFC 6455
        offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
        lines_out = [
            "HTTP/1.1 101 Switching Protocols",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Accept: {accept}",
        ]
        if SUBPROTOCOL in offered:
            lines_out.append(f"Sec-WebSocket-Protocol: {SUBPROTOCOL}")
        self.open = True
        return ("\r\n".join(lines_out) + "\r\n\r\n").encode("latin-1")

    def _next_frame(self) -> tuple[int, bytes] | None:
        buf = self._buf
        if len(buf) < 2:
            return None
        opcode = buf[0] & 0x0F
        masked = buf[1] & 0x80
        n = buf[1] & 0x7F
        at = 2
        if n == 126:
            if len(buf) < 4:
                return None
            n, at = struct.unpack_from(">H", buf, 2)[0], 4
        elif n == 127:
            if len(buf) < 10:
                return None
            n, at = struct.unpack_from(">Q", buf, 2)[0], 10
        mask = b""
        if masked:
            if len(buf) < at + 4:
                return None
            mask, at = bytes(buf[at : at + 4]), at + 4
        if len(buf) < at + n:
            return None
        payload = bytes(buf[at : at + n])
        del buf[: at + n]
        return opcode, _unmask(payload, mask) if mask else payload

    @staticmethod
    def wrap(amqp: bytes) -> bytes:
        return frame(_BINARY, amqp)


def _http(status: int, reason: str) -> bytes:
    return f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
