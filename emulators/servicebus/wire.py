"""Repair of the delivery-ids clients put on incoming transfers, before proton reads them.

Why: the SDK's AMQP stack (pyamqp, in azure-servicebus 7.x) reads ``session.next_outgoing_id``,
writes the transfer and only then increments it, with no lock (sync: threads of an
``AutoLockRenewer``; async: an ``await`` between the read and the increment). Concurrent
management requests on one session therefore go out with the *same* delivery-id (``N, N``,
then ``N+2``). Service Bus runs on Microsoft.Azure.Amqp, whose incoming session channel only
counts transfers against the window and does not compare delivery-ids with the expected one, so
the service carries on. python-qpid-proton instead ends the connection with "sequencing error,
expected delivery-id N+1, got N", which the client sees as lost locks and redeliveries.

Contract: :class:`DeliveryIdRepair` takes the bytes a client sends, in any chunking, and returns
the same frames where every transfer that starts a delivery carries the delivery-id proton
expects (the session's implicit next id) and every continuation frame carries its delivery's
id. Other frames pass through unchanged; bytes it cannot parse pass through unchanged and stop
the repair (proton then reports the error as before). Only complete frames are returned.
Frames a client sends on a channel after ending its session there (pyamqp detaches its
management link after ``end``) are dropped instead of costing the connection
("no such channel").
Dispositions the server sends keep proton's ids: for a duplicated id the first disposition
settles every client delivery holding that id, which is what the client's own bookkeeping does.
"""

from __future__ import annotations

import struct

from . import codec

_PROTOCOL_HEADER = b"AMQP"
_BEGIN, _END, _TRANSFER, _DETACH = 0x11, 0x17, 0x14, 0x16


def _uint(buf: bytes, pos: int) -> int | None:
    code = buf[pos]
    if code == 0x43:
        return 0
    if code == 0x52:
        return buf[pos + 1]
    if code == 0x70:
        return int(struct.unpack_from(">I", buf, pos + 1)[0])
    return None  # null (0x40) or not a uint


def _bool(buf: bytes, pos: int) -> bool:
    code = buf[pos]
    return code == 0x41 or (code == 0x56 and buf[pos + 1] == 1)


def _list_fields(buf: bytes, pos: int) -> tuple[list[tuple[int, int]], int]:
    """((start, end) of each element, end of the list) for a list encoded at ``pos``."""
    code = buf[pos]
    if code == 0x45:
        return [], pos + 1
    if code == 0xC0:
        count, at = buf[pos + 2], pos + 3
    elif code == 0xD0:
        count, at = struct.unpack_from(">I", buf, pos + 5)[0], pos + 9
    else:
        raise codec.CodecError("a performative must be a list")
    fields = []
    for _ in range(count):
        end = codec.skip_value(buf, at)
        fields.append((at, end))
        at = end
    return fields, at


def _encode_list(items: list[bytes]) -> bytes:
    body = b"".join(items)
    if len(body) + 1 < 256 and len(items) < 256:
        return bytes((0xC0, len(body) + 1, len(items))) + body
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body


class DeliveryIdRepair:
    """One connection's incoming byte stream (see the module docstring)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._next_id: dict[int, int] = {}  # channel -> delivery-id proton expects next
        self._open: dict[tuple[int, int], int] = {}  # (channel, handle) -> id of a partial delivery
        self._ended: set[int] = set()  # channels the client has ended
        self._broken = False
        #: Transfers whose delivery-id was rewritten, frames dropped after an ``end``.
        self.repaired = 0
        self.dropped = 0

    def feed(self, data: bytes) -> bytes:
        if self._broken:
            return data
        buf = self._buf
        buf += data
        out = bytearray()
        pos = 0
        try:
            while len(buf) - pos >= 8:
                if buf[pos : pos + 4] == _PROTOCOL_HEADER:
                    out += buf[pos : pos + 8]
                    pos += 8
                    continue
                size = int.from_bytes(buf[pos : pos + 4], "big")
                if size < 8:
                    raise codec.CodecError("bad frame size")
                if len(buf) - pos < size:
                    break
                out += self._frame(bytes(buf[pos : pos + size]))
                pos += size
        except (codec.CodecError, IndexError, struct.error):
            self._broken = True
            out += buf[pos:]
            pos = len(buf)
        del buf[:pos]
        return bytes(out)

    def _frame(self, frame: bytes) -> bytes:
        doff, kind = frame[4], frame[5]
        at = doff * 4
        if kind != 0 or len(frame) <= at + 3 or frame[at] != 0x00 or frame[at + 1] != 0x53:
            return frame  # SASL frame, heartbeat, or a descriptor pyamqp does not write
        code = frame[at + 2]
        channel = int.from_bytes(frame[6:8], "big")
        if channel in self._ended and code != _BEGIN:
            # pyamqp detaches its management link after ending the session; proton would
            # close the connection with "no such channel", Service Bus lets it pass.
            self.dropped += 1
            return b""
        if code not in (_BEGIN, _END, _TRANSFER, _DETACH):
            return frame
        fields, perf_end = _list_fields(frame, at + 3)
        if code == _BEGIN:
            next_id = _uint(frame, fields[1][0]) if len(fields) > 1 else None
            self._next_id[channel] = next_id or 0
            self._ended.discard(channel)
            return frame
        if code == _END:
            self._ended.add(channel)
            self._next_id.pop(channel, None)
            for key in [k for k in self._open if k[0] == channel]:
                del self._open[key]
            return frame
        handle = _uint(frame, fields[0][0]) if fields else None
        if handle is None:
            return frame
        if code == _DETACH:
            self._open.pop((channel, handle), None)
            return frame
        return self._transfer(frame, channel, handle, fields, at, perf_end)

    def _transfer(
        self,
        frame: bytes,
        channel: int,
        handle: int,
        fields: list[tuple[int, int]],
        at: int,
        perf_end: int,
    ) -> bytes:
        if channel not in self._next_id:
            return frame
        key = (channel, handle)
        if key in self._open:
            expected = self._open[key]
        else:
            expected = self._next_id[channel]
            self._next_id[channel] = (expected + 1) & 0xFFFFFFFF
        more = len(fields) > 5 and _bool(frame, fields[5][0])
        aborted = len(fields) > 9 and _bool(frame, fields[9][0])
        if more and not aborted:
            self._open[key] = expected
        else:
            self._open.pop(key, None)
        given = _uint(frame, fields[1][0]) if len(fields) > 1 else None
        if given is None or given == expected:
            return frame
        self.repaired += 1
        items = [frame[start:end] for start, end in fields]
        items[1] = b"\x70" + struct.pack(">I", expected)
        performative = frame[at : at + 3] + _encode_list(items)
        rest = frame[8:at] + performative + frame[perf_end:]
        return struct.pack(">I", 8 + len(rest)) + frame[4:8] + rest
