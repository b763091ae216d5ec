"""Redis implementation of the :class:`~cronwarden.model.ports.Store` port.

Layout (``P`` is the key prefix, ``T`` the job's hash tag, see :func:`tag`):

* ``P:{T}:r:<kind>:<id>``: one hash per record: field ``v`` holds the version, field
  ``.<name>`` the JSON text of each data field. Held per field so that a Merge adds and raises
  counters server-side (``HINCRBY``, an exact integer compare) without decoding the record in
  Lua, whose cjson would round floats to 14 digits and integers past 2**53.
* ``P:{T}:x:<kind>``: a sorted set of the job's record ids of that kind, all of score 0, so
  ``ZRANGEBYLEX`` answers ``query``'s prefix and range in id order (byte order of UTF-8 is
  code-point order: the order of every other store).
* ``P:{T}:e:<kind>``: the ids whose records carry an ``expire_at``, scored by it (ms).
* ``P:{T}:clock``: the job's version counter.
* ``P:jobs``: a hash of every job that has records (job -> tag), for ``query`` without a job.

**Why a Lua script and not MULTI/WATCH.** A commit is a compare-and-set over several records:
with WATCH the client reads the versions, then sends MULTI/EXEC, and a concurrent writer makes
EXEC fail so the whole read-check-write is resent: two or more round trips per commit, more
under contention (eight processes racing for one window). A script reads, checks and writes in
one round trip on the server, and nothing runs between its steps. A script is not rolled back
by a failing command, so it checks every precondition (and that every counter a Merge adds to
is an integer) before its first write, and its writes are commands that cannot fail on the
types it checked. The ``#!lua`` shebang makes Redis refuse the whole script up front under
``maxmemory`` pressure (``OOM``) instead of failing half-way.

**Redis Cluster.** Every key of a job carries the job's hash tag, so a commit (all one job's
records, by the port's rules) lives in one slot and its script runs unchanged on a cluster. Only
``P:jobs`` is shared: on a single server a commit that creates records updates it in the same
script; on a cluster (``cluster=True``) it is written in a second request to its own slot before
the commit (an entry without records is harmless), and a query without a job reads it and then
asks each job's slot (one request per job).

**Versions** are ``"<clock>-<nonce>"``: the job's counter (``INCR``, never reset when a record
is deleted) and a random part drawn per commit, so a version never repeats for a key, even when
a failover loses the last writes and the counter goes back (docs/redis.md).

**Retention by TTL.** A record whose data holds ``expire_at`` (ISO text with an offset) gets
``PEXPIREAT`` at that instant, or ``min_retention`` after the write if that is later: Redis
drops it by itself. ``expire_at`` says "may be deleted after", as on the other stores (a
DynamoDB TTL or the Postgres sweep acts minutes to hours late); deleting a record the moment
it is written, because the writer's clock put ``expire_at`` in the past, would drop a claim
under its owner and let the window run again. Its id stays in the job's index until a
later commit of that job and kind removes up to 100 expired ids, or a query meets it missing.

**Errors** (see :mod:`._link`): not sent or refused before running: ``StoreUnavailable``; sent
and the reply lost: ``CommitOutcomeUnknown`` (never resent); text that is not UTF-8 (a lone
surrogate) or a Merge counter that is not an integer: ``ContentRefused``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from datetime import datetime
from typing import Any

from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    ContentRefused,
    StoreUnavailable,
)
from cronwarden.model.ports import (
    Create,
    Delete,
    Key,
    Merge,
    Op,
    Record,
    Store,
    StoreCapabilities,
    Update,
    Version,
    decode_json,
)
from cronwarden.model.text import storable

from ._link import Link, LostReply, Script, ScriptFailed
from .settings import RedisSettings

_LESS = """
local function less(a, b)  -- exact order of two integer texts
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then return na end
  if na then a, b = string.sub(b, 2), string.sub(a, 2) end
  if #a ~= #b then return #a < #b end
  return a < b
end
local function integer(v) return (not v) or v == 'null' or string.match(v, '^%-?%d+$') ~= nil end
"""

_COMMIT = Script(
    "#!lua\n"
    + _LESS
    + """
local nonce, job, register, nops = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local keep = tonumber(ARGV[5])
local ops, a = {}, 6
for i = 1, nops do
  local op = {t = ARGV[a], id = ARGV[a + 1], v = ARGV[a + 2], e = ARGV[a + 3],
              key = KEYS[3 * i], idx = KEYS[3 * i + 1], exp = KEYS[3 * i + 2]}
  a = a + 4
  op.f = {}
  for _ = 1, tonumber(ARGV[a]) do
    op.f[#op.f + 1] = ARGV[a + 1]; op.f[#op.f + 1] = ARGV[a + 2]; a = a + 2
  end
  a = a + 1
  op.n = {}
  for _ = 1, tonumber(ARGV[a]) do op.n[#op.n + 1] = {ARGV[a + 1], ARGV[a + 2]}; a = a + 2 end
  a = a + 1
  op.x = {}
  for _ = 1, tonumber(ARGV[a]) do op.x[#op.x + 1] = {ARGV[a + 1], ARGV[a + 2]}; a = a + 2 end
  a = a + 1
  ops[i] = op
end
-- every precondition before the first write: a script is not rolled back
for i, op in ipairs(ops) do
  if op.t == 'c' then
    if redis.call('EXISTS', op.key) == 1 then return {'conflict', i - 1, 'exists'} end
  elseif op.t == 'u' or op.t == 'd' then
    if redis.call('HGET', op.key, 'v') ~= op.v then return {'conflict', i - 1, 'version'} end
  else
    for _, c in ipairs(op.n) do
      if not integer(redis.call('HGET', op.key, c[1])) then return {'refused', i - 1, c[1]} end
    end
    for _, c in ipairs(op.x) do
      if not integer(redis.call('HGET', op.key, c[1])) then return {'refused', i - 1, c[1]} end
    end
  end
end
local version = redis.call('INCR', KEYS[1]) .. '-' .. nonce
if register == '1' then redis.call('HSET', KEYS[2], job, ARGV[#ARGV]) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out, swept = {'ok'}, {}
for i, op in ipairs(ops) do
  if op.t == 'd' then
    redis.call('DEL', op.key)
    redis.call('ZREM', op.idx, op.id)
    redis.call('ZREM', op.exp, op.id)
    out[i + 1] = ''
  else
    if op.t ~= 'm' then redis.call('DEL', op.key) end
    if #op.f > 0 then redis.call('HSET', op.key, unpack(op.f)) end
    for _, c in ipairs(op.n) do
      local cur = redis.call('HGET', op.key, c[1])
      if cur and cur ~= 'null' then redis.call('HINCRBY', op.key, c[1], c[2])
      else redis.call('HSET', op.key, c[1], c[2]) end
    end
    for _, c in ipairs(op.x) do
      local cur = redis.call('HGET', op.key, c[1])
      if (not cur) or cur == 'null' or less(cur, c[2]) then
        redis.call('HSET', op.key, c[1], c[2])
      end
    end
    redis.call('HSET', op.key, 'v', version)
    redis.call('ZADD', op.idx, 0, op.id)
    if op.e ~= '' then
      local at = string.format('%.0f', math.max(tonumber(op.e), now + keep))
      redis.call('PEXPIREAT', op.key, at)
      redis.call('ZADD', op.exp, at, op.id)
    elseif op.t ~= 'm' then
      redis.call('ZREM', op.exp, op.id)
    end
    out[i + 1] = version
  end
  if not swept[op.exp] then
    swept[op.exp] = true
    local gone = redis.call('ZRANGEBYSCORE', op.exp, '-inf', now, 'LIMIT', 0, 100)
    if #gone > 0 then
      redis.call('ZREM', op.exp, unpack(gone))
      redis.call('ZREM', op.idx, unpack(gone))
    end
  end
end
return out
"""
)

#: A query answers three bulk strings per record (id, version, the data as one JSON object
#: assembled from the stored JSON texts of its fields) instead of the hash's pairs: a tenth of
#: the reply elements for redis-py to parse and one JSON decode per record in Python (the
#: watcher's query of every job status). Field names are text the client wrote, so cjson's
#: string encoding (escapes, UTF-8 bytes kept) is exact.
_QUERY_BODY = """
local function record(fields)
  local parts, version = {}, ''
  for i = 1, #fields, 2 do
    local name = fields[i]
    if name == 'v' then version = fields[i + 1]
    else parts[#parts + 1] = cjson.encode(string.sub(name, 2)) .. ':' .. fields[i + 1] end
  end
  return version, '{' .. table.concat(parts, ',') .. '}'
end
local function range(idx, rec, lo, hi, limit, out)
  local offset, found = 0, 0
  while true do
    local want = 500
    if limit >= 0 then want = limit - found end
    if want <= 0 then return end
    local ids = redis.call('ZRANGEBYLEX', idx, lo, hi, 'LIMIT', offset, want)
    if #ids == 0 then return end
    offset = offset + #ids
    local stale = {}
    for _, id in ipairs(ids) do
      local fields = redis.call('HGETALL', rec .. id)
      if #fields == 0 then stale[#stale + 1] = id
      else
        local version, data = record(fields)
        out[#out + 1] = id; out[#out + 1] = version; out[#out + 1] = data
        found = found + 1
      end
    end
    if #stale > 0 then
      redis.call('ZREM', idx, unpack(stale))
      offset = offset - #stale
    end
    if #ids < want then return end
  end
end
"""

#: KEYS: the job's index; ARGV: record key prefix, lo, hi, limit (-1: none)
_QUERY = Script(
    "#!lua\n"
    + _QUERY_BODY
    + """
local out = {}
range(KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), out)
return out
"""
)

#: single server only: KEYS: the jobs hash; ARGV: key prefix, kind, lo, hi, limit
_QUERY_ALL = Script(
    "#!lua\n"
    + _QUERY_BODY
    + """
local jobs = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #jobs, 2 do
  local base = ARGV[1] .. ':{' .. jobs[i + 1] .. '}:'
  local rows = {}
  range(base .. 'x:' .. ARGV[2], base .. 'r:' .. ARGV[2] .. ':', ARGV[3], ARGV[4], -1, rows)
  if #rows > 0 then out[#out + 1] = jobs[i]; out[#out + 1] = rows end
end
return out
"""
)


def tag(job: str) -> str:
    """The hash tag of ``job``'s keys: the name itself, or (for a name holding a brace, which
    would end or nest the tag) ``#`` and 20 hex digits of its SHA-1."""
    if "{" in job or "}" in job:
        return "#" + hashlib.sha1(job.encode(), usedforsecurity=False).hexdigest()[:20]
    return job


class RedisStore(Store):
    """Records in Redis (one server, Sentinel-managed or a managed service) or a Redis Cluster;
    safe for any number of processes on any number of hosts. See the module docstring.

    ``settings``: a :class:`RedisSettings` or a URL. ``link``: share a connection pool with the
    queue (the provider does); a store given one does not close it.
    """

    capabilities = StoreCapabilities(max_commit_ops=1000, max_page_bytes=1_000_000)

    def __init__(self, settings: RedisSettings | str, *, link: Link | None = None) -> None:
        super().__init__()
        if isinstance(settings, str):
            settings = RedisSettings(url=settings)
        self.settings = settings
        self._owns_link = link is None
        self.link = link or Link(settings, name="cronwarden-store")
        self.link.on_extra = self._round_trip
        self.prefix = settings.prefix
        self._jobs_key = f"{self.prefix}:jobs"
        self._registered: set[str] = set()
        self._registered_lock = threading.Lock()

    # -- keys --------------------------------------------------------------------------------

    def _base(self, job: str) -> str:
        return f"{self.prefix}:{{{tag(job)}}}:"

    def record_key(self, key: Key) -> str:
        return f"{self._base(key.job)}r:{key.kind}:{key.id}"

    # -- port --------------------------------------------------------------------------------

    def _get(self, key: Key) -> Record | None:
        what = f"get {key.kind} {key.job}/{key.id}"
        name = _utf8(self.record_key(key), what)
        try:
            (fields,) = self.link.call(name, [["HGETALL", name]], what=what)
        except LostReply as exc:
            raise StoreUnavailable(str(exc)) from exc
        if isinstance(fields, Exception):
            raise StoreUnavailable(self.link._where(f"{what}: {fields}"))
        return _record(key, fields) if fields else None

    def _commit(self, ops: list[Op]) -> list[Version]:
        job = ops[0].key.job
        what = f"commit of {len(ops)} op(s) for {job}"
        base = self._base(job)
        # the jobs hash is another slot: on a cluster its place holds the clock again
        keys = [base + "clock", base + "clock" if self.settings.cluster else self._jobs_key]
        keep_ms = int(self.settings.min_retention * 1000)
        args: list[Any] = [secrets.token_hex(4), job, "0", len(ops), keep_ms]
        creates = False
        for index, op in enumerate(ops):
            k = op.key
            keys += [f"{base}r:{k.kind}:{k.id}", f"{base}x:{k.kind}", f"{base}e:{k.kind}"]
            args += _encode(index, op)
            creates = creates or isinstance(op, Create | Merge)
        then: list[list[Any]] = []
        if creates and not self.settings.cluster:
            args[2] = "1"  # in the same script: free, and it heals a jobs hash a failover lost
        elif creates and job not in self._registered:
            self._register_cluster(job)
        args.append(tag(job))
        if self.settings.wait_replicas:
            then.append(
                ["WAIT", self.settings.wait_replicas, int(self.settings.wait_timeout * 1000)]
            )
        encoded_keys = [_utf8(k, what) for k in keys]
        encoded_args = [_utf8(a, what) if isinstance(a, str) else a for a in args]
        try:
            reply = self.link.run(_COMMIT, encoded_keys, encoded_args, what=what, then=then)
        except LostReply as exc:
            raise CommitOutcomeUnknown(str(exc)) from exc
        except ScriptFailed as exc:
            raise CommitOutcomeUnknown(f"{exc} (the commit may have applied in part)") from exc
        if then:
            reply, acked = reply[0], reply[1]
            applied = isinstance(reply, list) and reply[:1] == [b"ok"]
            if applied and (
                isinstance(acked, Exception) or int(acked) < self.settings.wait_replicas
            ):
                raise CommitOutcomeUnknown(
                    self.link._where(
                        f"{what}: applied on the master, but {acked} of "
                        f"{self.settings.wait_replicas} replica(s) acknowledged it within "
                        f"{self.settings.wait_timeout:g}s (a failover now could lose it)"
                    )
                )
        status = reply[0]
        if status == b"conflict":
            index = int(reply[1])
            k = ops[index].key
            raise CommitConflict(index, reply[2].decode(), f"{k.kind} {k.job}/{k.id}")
        if status == b"refused":
            index, name = int(reply[1]), reply[2].decode()[1:]
            k = ops[index].key
            raise ContentRefused(
                f"Redis store: Merge of {k.kind} {k.job}/{k.id}: field {name!r} holds a value "
                "that is not an integer, so it cannot be added to or raised; nothing applied"
            )
        return [v.decode() if v else None for v in reply[1:]]

    def _register_cluster(self, job: str) -> None:
        """On a cluster, the jobs hash is in another slot: written before the first commit of
        ``job`` in this process that creates records (a request of its own, counted)."""
        what = f"register job {job}"
        self._round_trip("read")
        try:
            self.link.call(
                self._jobs_key,
                [["HSET", self._jobs_key, _utf8(job, what), _utf8(tag(job), what)]],
                what=what,
            )
        except LostReply as exc:
            raise StoreUnavailable(str(exc)) from exc
        with self._registered_lock:
            self._registered.add(job)

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:
        what = f"query {kind}"
        lo, hi = _bounds(prefix, start, end)
        if lo is None:
            return []
        try:
            if job is not None:
                rows = self._query_job(kind, job, lo, hi, limit, what)
                return _records(kind, job, rows)
            if not self.settings.cluster:
                args = [self.prefix, kind, lo, hi, -1]
                reply = self.link.run(_QUERY_ALL, [self._jobs_key], args, what=what)
                per_job = {reply[i].decode(): reply[i + 1] for i in range(0, len(reply), 2)}
            else:
                (jobs,) = self.link.call(self._jobs_key, [["HGETALL", self._jobs_key]], what=what)
                names = sorted(jobs[i].decode() for i in range(0, len(jobs), 2))
                per_job = {}
                for index, name in enumerate(names):
                    if index:
                        self._round_trip("read", kind)
                    per_job[name] = self._query_job(kind, name, lo, hi, None, what)
        except (LostReply, ScriptFailed) as exc:
            raise StoreUnavailable(str(exc)) from exc
        out: list[Record] = []
        for name in sorted(per_job):
            out += _records(kind, name, per_job[name])
            if limit is not None and len(out) >= limit:
                return out[:limit]
        return out

    def _query_job(
        self, kind: str, job: str, lo: bytes, hi: bytes, limit: int | None, what: str
    ) -> list[Any]:
        base = self._base(job)
        keys = [_utf8(f"{base}x:{kind}", what)]
        args = [_utf8(f"{base}r:{kind}:", what), lo, hi, -1 if limit is None else limit]
        rows: list[Any] = self.link.run(_QUERY, keys, args, what=what)
        return rows

    def close(self) -> None:
        if self._owns_link:
            self.link.close()


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise ContentRefused(
            f"Redis store: the {what} holds text that is not UTF-8 (a lone surrogate: "
            f"{storable(text, 80)!r}); nothing was sent"
        ) from exc


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _encode(index: int, op: Op) -> list[Any]:
    """One op as the script's ARGV block: type, id, expected version, expiry (ms or ''),
    then counted field pairs, increment pairs and maximum pairs (names with a leading ``.``)."""
    k = op.key
    fields: dict[str, Any] = {}
    incs: dict[str, int] = {}
    maxs: dict[str, int] = {}
    version = ""
    if isinstance(op, Create):
        kind, fields = "c", dict(op.data)
    elif isinstance(op, Update | Delete):
        if not isinstance(op.version, str) or "-" not in op.version:
            # not a version this store hands out: the precondition cannot hold
            raise CommitConflict(index, "version", f"{k.kind} {k.job}/{k.id}: foreign version")
        version = op.version
        if isinstance(op, Delete):
            kind = "d"
        else:
            kind, fields = "u", dict(op.data)
    elif isinstance(op, Merge):
        kind, fields, incs, maxs = "m", dict(op.fields), dict(op.increments), dict(op.maximums)
        for name, amount in (*incs.items(), *maxs.items()):
            if not -(2**63) <= amount < 2**63:
                raise ContentRefused(
                    f"Redis store: Merge of {k.kind} {k.job}/{k.id}: counter {name!r} = {amount} "
                    "is past Redis's 64-bit integers; nothing was sent"
                )
    else:  # pragma: no cover
        raise TypeError(f"unknown op {op!r}")
    out: list[Any] = [kind, k.id, version, _expiry_ms(fields.get("expire_at"))]
    out.append(len(fields))
    for name, value in fields.items():
        out += ["." + name, _json(value)]
    out.append(len(incs))
    for name, amount in incs.items():
        out += ["." + name, str(int(amount))]
    out.append(len(maxs))
    for name, amount in maxs.items():
        out += ["." + name, str(int(amount))]
    return out


def _expiry_ms(value: Any) -> str:
    """``expire_at`` (ISO text with an offset) as epoch milliseconds; ``""`` when absent or
    unreadable (the record is then kept, never dropped early)."""
    if not isinstance(value, str):
        return ""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if parsed.tzinfo is None:
        return ""
    return str(int(parsed.timestamp() * 1000))


def _bounds(prefix: str, start: str | None, end: str | None) -> tuple[bytes | None, bytes]:
    """``ZRANGEBYLEX`` bounds for ids starting with ``prefix`` in ``[start, end)`` (``None``
    low bound: the range is empty). UTF-8 never holds byte 0xFF, so ``prefix + 0xFF`` is past
    every id that starts with ``prefix``."""
    low = max(prefix, start or "")
    high: bytes | None = None
    if prefix:
        high = prefix.encode() + b"\xff"
    if end is not None:
        e = end.encode()
        high = e if high is None else min(high, e)
    lo = b"[" + _utf8(low, "query range") if low else b"-"
    hi = b"(" + high if high is not None else b"+"
    if high is not None and low.encode() >= high:
        return None, hi
    return lo, hi


def _record(key: Key, fields: list[bytes] | dict[bytes, bytes]) -> Record:
    pairs = (
        fields.items() if isinstance(fields, dict) else zip(fields[::2], fields[1::2], strict=True)
    )
    data: dict[str, Any] = {}
    version: str = ""
    for name, value in pairs:
        if name == b"v":
            version = value.decode()
        else:
            data[name[1:].decode()] = decode_json(value.decode())
    return Record(key, data, version)


def _records(kind: str, job: str, rows: list[Any]) -> list[Record]:
    """Records from a query script's rows: id, version, data (one JSON object) per record."""
    return [
        Record(
            Key(kind, job, rows[i].decode()),
            decode_json(rows[i + 2].decode()),
            rows[i + 1].decode(),
        )
        for i in range(0, len(rows), 3)
    ]
