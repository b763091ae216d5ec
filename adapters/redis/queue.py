"""Redis Streams implementation of the :class:`~cronwarden.model.ports.Queue` port.

Keys (``P`` the prefix, ``q`` the queue name; one hash tag, so one slot on a cluster):

* ``P:{q}:stream``: the messages, read by the consumer group ``workers`` (``XREADGROUP``); an
  entry holds ``m`` (message id), ``b`` (body), ``t`` (enqueued, ms) and ``a:<name>`` per
  attribute.
* ``P:{q}:inflight``: received entries scored by the instant their visibility ends.
  ``receive`` first claims the pending entries whose visibility ended (``XCLAIM`` from the
  group's pending-entry list: the redelivery; not ``XAUTOCLAIM``, whose single idle time cannot
  honour a per-delivery ``visibility`` and ``extend``), then reads new ones.
* ``P:{q}:attempts`` / ``P:{q}:receipts``: deliveries so far, and the receipt of the current
  delivery: a settle whose receipt is no longer current (its visibility ran out and another
  receiver has the message) changes nothing.
* ``P:{q}:delayed``: messages published or retried with a delay, scored by due time and moved
  into the stream by the next ``receive`` (Redis has no delayed delivery of its own).
* ``P:{q}:dlq``: the dead-letter stream; an entry keeps the message's fields and adds
  ``reason``, ``desc``, ``n`` (deliveries) and ``at``. After ``max_deliveries`` deliveries
  without settlement ``receive`` moves a message there itself (``MaxDeliveryCountExceeded``).
* ``P:{q}:dedup:<id>``: a publish's ``dedup_id``, kept ``dedup_window`` seconds (``SET NX PX``).

Every operation is one Lua script (atomic; no lost or doubled message between its steps). A
failure to reach Redis raises :class:`~cronwarden.model.errors.StoreUnavailable` in one line
with the URL's password masked.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cronwarden.model.errors import StoreUnavailable
from cronwarden.model.ports import DeadLetter, Delivery, Queue, QueueCapabilities
from cronwarden.model.text import storable

from ._link import Link, LostReply, Script, ScriptFailed
from .settings import RedisSettings

if TYPE_CHECKING:
    from cronwarden.ops.doctor import DeadLetterPolicy

_POLL_SECONDS = 0.05
_MAX_REASON_BYTES = 200
_MAX_DESCRIPTION_BYTES = 16_000
_GROUP = "workers"

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

#: KEYS: stream, delayed, dedup key; ARGV: dedup window ms ('' none), delay ms, id, body, attrs
_PUBLISH = Script(
    "#!lua\n"
    + _NOW
    + """
if ARGV[1] ~= '' then
  if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[1]) then return 0 end
end
local fields = {'m', ARGV[3], 'b', ARGV[4], 't', tostring(now)}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
local delay = tonumber(ARGV[2])
if delay > 0 then
  redis.call('ZADD', KEYS[2], now + delay, cmsgpack.pack(fields))
else
  redis.call('XADD', KEYS[1], '*', unpack(fields))
end
return 1
"""
)

#: KEYS: stream, delayed, inflight, attempts, receipts, dlq
#: ARGV: consumer, max messages, visibility ms, max deliveries, receipt base
_RECEIVE = Script(
    "#!lua\n"
    + _NOW
    + """
local S, D, I, A, R, L = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local group, consumer, max = 'workers', ARGV[1], tonumber(ARGV[2])
local vis, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.pcall('XGROUP', 'CREATE', S, group, '0', 'MKSTREAM')  -- BUSYGROUP once it exists
local due = redis.call('ZRANGEBYSCORE', D, '-inf', now, 'LIMIT', 0, 100)
for _, packed in ipairs(due) do
  redis.call('XADD', S, '*', unpack(cmsgpack.unpack(packed)))
  redis.call('ZREM', D, packed)
end
local out, handed = {}, 0
local function hand(id, fields, n)
  handed = handed + 1
  local token = ARGV[5] .. ':' .. handed
  redis.call('HSET', R, id, token)
  redis.call('ZADD', I, now + vis, id)
  out[#out + 1] = id; out[#out + 1] = fields; out[#out + 1] = n; out[#out + 1] = token
end
local expired = redis.call('ZRANGEBYSCORE', I, '-inf', now, 'LIMIT', 0, max)
for _, id in ipairs(expired) do
  local claimed = redis.call('XCLAIM', S, group, consumer, 0, id)
  redis.call('HDEL', R, id)
  local entry = claimed[1]
  if not entry or not entry[2] then
    redis.call('ZREM', I, id); redis.call('HDEL', A, id)
  else
    local n = tonumber(redis.call('HGET', A, id) or '0')
    if n >= limit then
      local dead = {}
      for _, f in ipairs(entry[2]) do dead[#dead + 1] = f end
      for _, f in ipairs({'reason', 'MaxDeliveryCountExceeded',
                          'desc', 'not settled after ' .. n .. ' deliveries',
                          'n', tostring(n), 'at', tostring(now)}) do
        dead[#dead + 1] = f
      end
      redis.call('XADD', L, '*', unpack(dead))
      redis.call('XACK', S, group, id); redis.call('XDEL', S, id)
      redis.call('ZREM', I, id); redis.call('HDEL', A, id)
    else
      hand(id, entry[2], redis.call('HINCRBY', A, id, 1))
    end
  end
end
if handed < max then
  local read = redis.call('XREADGROUP', 'GROUP', group, consumer,
                          'COUNT', max - handed, 'STREAMS', S, '>')
  if read then
    for _, entry in ipairs(read[1][2]) do
      redis.call('HSET', A, entry[1], 1)
      hand(entry[1], entry[2], 1)
    end
  end
end
return out
"""
)

#: KEYS: stream, inflight, attempts, receipts, dlq
#: ARGV: action, entry id, receipt, milliseconds, reason, description
_SETTLE = Script(
    "#!lua\n"
    + _NOW
    + """
local S, I, A, R, L = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local action, id = ARGV[1], ARGV[2]
if redis.call('HGET', R, id) ~= ARGV[3] then return 0 end
if action == 'extend' then
  redis.call('ZADD', I, now + tonumber(ARGV[4]), id)
  return 1
end
if action == 'retry' then
  redis.call('ZADD', I, now + tonumber(ARGV[4]), id)
  redis.call('HDEL', R, id)
  return 1
end
if action == 'dead' then
  local e = redis.call('XRANGE', S, id, id)
  if #e > 0 then
    local dead = {}
    for _, f in ipairs(e[1][2]) do dead[#dead + 1] = f end
    for _, f in ipairs({'reason', ARGV[5], 'desc', ARGV[6],
                        'n', redis.call('HGET', A, id) or '0', 'at', tostring(now)}) do
      dead[#dead + 1] = f
    end
    redis.call('XADD', L, '*', unpack(dead))
  end
end
redis.call('XACK', S, 'workers', id); redis.call('XDEL', S, id)
redis.call('ZREM', I, id); redis.call('HDEL', A, id); redis.call('HDEL', R, id)
return 1
"""
)

#: KEYS: stream, dlq; ARGV: limit
_REDRIVE = Script(
    "#!lua\n"
    + """
local entries = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', tonumber(ARGV[1]))
local drop = {reason = true, desc = true, n = true, at = true}
for _, e in ipairs(entries) do
  local fields, generation = {}, 0
  for i = 1, #e[2], 2 do
    local name, value = e[2][i], e[2][i + 1]
    if name == 'a:cw-redrive' then generation = tonumber(value) or 0
    elseif not drop[name] then fields[#fields + 1] = name; fields[#fields + 1] = value end
  end
  fields[#fields + 1] = 'a:cw-redrive'; fields[#fields + 1] = tostring(generation + 1)
  redis.call('XADD', KEYS[1], '*', unpack(fields))
  redis.call('XDEL', KEYS[2], e[1])
end
return #entries
"""
)

#: KEYS: dlq; ARGV: message ids to remove. Deletes the letters whose ``m`` field is one of them.
_DLQ_REMOVE = Script(
    "#!lua\n"
    + """
local wanted = {}
for _, id in ipairs(ARGV) do wanted[id] = true end
local removed = 0
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  for i = 1, #e[2], 2 do
    if e[2][i] == 'm' then
      if wanted[e[2][i + 1]] then removed = removed + redis.call('XDEL', KEYS[1], e[1]) end
      break
    end
  end
end
return removed
"""
)

#: KEYS: stream, delayed; ARGV: the attribute field, its value
_HOLDS = Script(
    "#!lua\n"
    + """
local function has(fields)
  for i = 1, #fields, 2 do
    if fields[i] == ARGV[1] and fields[i + 1] == ARGV[2] then return true end
  end
  return false
end
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  if has(e[2]) then return 1 end
end
for _, packed in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if has(cmsgpack.unpack(packed)) then return 1 end
end
return 0
"""
)


class RedisQueue(Queue):
    """A durable queue on Redis Streams, safe for any number of worker processes and hosts.

    ``settings``: a :class:`RedisSettings` or a URL (``queue``, ``max_deliveries`` and
    ``dedup_window`` come from it). ``link``: share a connection pool with the store.
    """

    def __init__(self, settings: RedisSettings | str, *, link: Link | None = None) -> None:
        if isinstance(settings, str):
            settings = RedisSettings(url=settings)
        self.settings = settings
        self.max_deliveries = settings.max_deliveries
        self.capabilities = QueueCapabilities(dedup=True, max_deliveries=settings.max_deliveries)
        self._owns_link = link is None
        self.link = link or Link(settings, name="cronwarden-queue")
        base = f"{settings.prefix}:{{{settings.queue}}}:"
        self._base = base
        self.stream, self.delayed, self.dlq = base + "stream", base + "delayed", base + "dlq"
        self.inflight, self.attempts, self.receipts = (
            base + "inflight",
            base + "attempts",
            base + "receipts",
        )
        self.consumer = f"c-{secrets.token_hex(6)}"

    def _run(self, script: Script, keys: list[str], args: list[Any], what: str) -> Any:
        try:
            return self.link.run(script, keys, args, what=f"queue {self.settings.queue}: {what}")
        except (LostReply, ScriptFailed) as exc:
            raise StoreUnavailable(str(exc)) from exc

    def _call(self, command: list[Any], what: str) -> Any:
        try:
            (reply,) = self.link.call(
                self.stream, [command], what=f"queue {self.settings.queue}: {what}"
            )
        except LostReply as exc:
            raise StoreUnavailable(str(exc)) from exc
        if isinstance(reply, Exception):
            raise StoreUnavailable(self.link._where(f"{what}: {reply}"))
        return reply

    # -- publisher ---------------------------------------------------------------------------

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        window = str(int(self.settings.dedup_window * 1000)) if dedup_id is not None else ""
        args: list[Any] = [
            window,
            str(int(max(0.0, delay) * 1000)),
            (dedup_id or secrets.token_hex(8)).encode("utf-8", "surrogatepass"),
            bytes(body),
        ]
        for name, value in (attributes or {}).items():
            args += [
                f"a:{name}".encode("utf-8", "surrogatepass"),
                str(value).encode("utf-8", "surrogatepass"),
            ]
        dedup_key = self._base + "dedup:" + (dedup_id or "")
        keys = [self.stream, self.delayed, dedup_key]
        self._run(_PUBLISH, keys, args, "publish")

    # -- consumer ----------------------------------------------------------------------------

    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            found = self._receive_now(max_messages, visibility)
            if found or time.monotonic() >= deadline:
                return found
            time.sleep(min(_POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def _receive_now(self, max_messages: int, visibility: float) -> list[Delivery]:
        keys = [
            self.stream, self.delayed, self.inflight, self.attempts, self.receipts, self.dlq,
        ]  # fmt: skip
        args = [
            self.consumer,
            max(1, max_messages),
            int(max(0.0, visibility) * 1000),
            self.max_deliveries,
            secrets.token_hex(8),
        ]
        reply = self._run(_RECEIVE, keys, args, "receive")
        out: list[Delivery] = []
        for i in range(0, len(reply), 4):
            entry_id, fields, attempt, token = reply[i : i + 4]
            message = _fields(fields)
            out.append(
                Delivery(
                    message_id=message.message_id,
                    body=message.body,
                    attributes=message.attributes,
                    attempt=int(attempt),
                    handle=(entry_id, token),
                    enqueued_at=message.enqueued_at,
                )
            )
        return out

    def _settle(self, delivery: Delivery, action: str, ms: int = 0, *extra: str) -> None:
        entry_id, token = delivery.handle
        keys = [self.stream, self.inflight, self.attempts, self.receipts, self.dlq]
        args = [action, entry_id, token, ms, *[e.encode() for e in extra]]
        self._run(_SETTLE, keys, args, action)

    def ack(self, delivery: Delivery) -> None:
        self._settle(delivery, "ack")

    def retry(self, delivery: Delivery, delay: float) -> None:
        self._settle(delivery, "retry", int(max(0.0, delay) * 1000))

    def extend(self, delivery: Delivery, visibility: float) -> None:
        self._settle(delivery, "extend", int(max(0.0, visibility) * 1000))

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        """Move the delivery to the dead-letter stream with ``reason`` and ``description``
        (made storable); a delivery no longer current (already settled, or redelivered to
        another receiver) changes nothing."""
        self._settle(
            delivery,
            "dead",
            0,
            storable(reason, _MAX_REASON_BYTES),
            storable(description, _MAX_DESCRIPTION_BYTES),
        )

    def holds(self, run_key: str) -> bool:
        """Whether a message for ``run_key`` waits in the queue (ready, in flight or delayed;
        not dead-lettered): the CLI's manual trigger reads it to say "already queued"."""
        reply = self._run(
            _HOLDS, [self.stream, self.delayed], [b"a:run_key", run_key.encode()], "holds"
        )
        return bool(reply)

    def dead_letter_policy(self) -> DeadLetterPolicy:
        """For ``cronwarden doctor``: the dead-letter stream always exists (it is made on the
        first dead letter); the limit is ``max_deliveries``."""
        from cronwarden.ops.doctor import DeadLetterPolicy

        return DeadLetterPolicy(True, self.max_deliveries, f"the Redis stream {self.dlq}")

    def depth(self) -> int:
        """Messages waiting, delayed or in flight (not dead-lettered)."""
        try:
            length, delayed = self.link.call(
                self.stream,
                [["XLEN", self.stream], ["ZCARD", self.delayed]],
                what=f"queue {self.settings.queue}: depth",
            )
        except LostReply as exc:
            raise StoreUnavailable(str(exc)) from exc
        return int(length) + int(delayed)

    # -- dead letters ------------------------------------------------------------------------

    def dlq_depth(self) -> int:
        return int(self._call(["XLEN", self.dlq], "dlq depth"))

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        entries = self._call(["XRANGE", self.dlq, "-", "+", "COUNT", max(1, limit)], "dlq peek")
        out: list[DeadLetter] = []
        for _entry_id, fields in entries:
            message = _fields(fields)
            extra = message.extra
            at = extra.get("at")
            out.append(
                DeadLetter(
                    message_id=message.message_id,
                    body=message.body,
                    attributes=message.attributes,
                    reason=extra.get("reason", ""),
                    description=extra.get("desc", ""),
                    attempts=int(extra.get("n") or 0),
                    dead_lettered_at=datetime.fromtimestamp(int(at) / 1000, UTC) if at else None,
                )
            )
        return out

    def redrive(self, limit: int = 10) -> int:
        if limit < 1:
            raise ValueError("redrive limit must be at least 1")
        return int(self._run(_REDRIVE, [self.stream, self.dlq], [limit], "redrive"))

    def dlq_remove(self, message_ids: Sequence[str]) -> int:
        """Delete the dead letters with these message ids (one script: atomic)."""
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return 0
        return int(self._run(_DLQ_REMOVE, [self.dlq], ids, "dlq remove"))

    def close(self) -> None:
        if self._owns_link:
            self.link.close()


class _Message:
    __slots__ = ("attributes", "body", "enqueued_at", "extra", "message_id")

    def __init__(self) -> None:
        self.message_id = ""
        self.body = b""
        self.attributes: dict[str, str] = {}
        self.enqueued_at: datetime | None = None
        self.extra: dict[str, str] = {}


def _fields(fields: list[bytes]) -> _Message:
    message = _Message()
    for name, value in zip(fields[::2], fields[1::2], strict=True):
        if name == b"b":
            message.body = bytes(value)
        elif name == b"m":
            message.message_id = value.decode("utf-8", "surrogatepass")
        elif name == b"t":
            message.enqueued_at = datetime.fromtimestamp(int(value) / 1000, UTC)
        elif name.startswith(b"a:"):
            key = name[2:].decode("utf-8", "surrogatepass")
            message.attributes[key] = value.decode("utf-8", "surrogatepass")
        else:
            message.extra[name.decode()] = value.decode("utf-8", "replace")
    return message


__all__ = ["RedisQueue"]
