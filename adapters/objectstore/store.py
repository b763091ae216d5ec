"""A :class:`~cronwarden.model.ports.Store` whose only primitive is a conditional write on one
object (:class:`~.objects.ConditionalObjects`: S3, Azure Blob Storage, Google Cloud Storage).

Why one object per job. The port's ``commit`` is atomic over several records of one job (a claim
creates the run record, creates the lock and merges the status; a fenced ledger write updates
the run record and creates ledger pages). Object storage is atomic over one object only: two
conditional writes on two objects can land half. So every record of a job lives in **one
object**, ``<prefix>jobs/<quoted job>.json``, and every commit is one conditional write of that
object: all the commit's ops apply, or none. Fencing is as strict as on the database stores: a
fenced write is an ``Update`` of the run record with the version its writer read, checked
against the job object's current content inside the same conditional write; a takeover that
landed in between changed the object's version, so the stale write's precondition fails.

The object (compact JSON, ASCII-escaped so every text round-trips exactly, NUL included; a lone
surrogate is refused as on every store, see :func:`_refuse_surrogates`)::

    {"format": 1, "job": "<job>", "write": "<write id>",
     "records": {"<kind>": {"<id>": ["<version>", {<data>}, <written at, epoch s>]}}}

``write`` is a fresh random id per write, and a record's version is the write id of the commit
that last wrote it: versions of a key never repeat, and neither does the object's own version
(an S3 ETag is a hash of the content; the write id makes every content distinct).

A commit: the ops are checked against the job object as this store last saw it (a cache keyed
by the object's version), then the new object is written with ``If-Match: <that version>``
(``If-None-Match: *`` when the store has not seen the object: a fresh job costs one request).
When the object changed meanwhile the write is refused, the store reads the object again and
re-checks the ops against what is really there: a failed op is ``CommitConflict`` (nothing
applied), otherwise the write is sent again, at most :attr:`ObjectStore.attempts` times (then
``StoreUnavailable``: nothing applied). A record-level conflict seen on a cached object is
re-checked on a fresh read before it is reported, so the cache can never refuse a commit the
store would accept. Every request is counted: the port counts the first write; reads the store
makes on its own report ``read``, writes sent again report ``commit``.

Queries: one job's records are one read of its object. A query across jobs (the watcher's status
query) lists ``<prefix>jobs/`` (one request per page) and reads each job object whose listed
version differs from the cached one: 1 + (changed jobs) requests. Listings are strongly
consistent on S3, Blob Storage and GCS.

Retention: a record whose data carries an ``expire_at`` (ISO text) in the past, and that was
last written more than ``min_retention`` (one day) ago, is dropped from its job object on the
next write of that object (what a database's TTL does eventually; the day keeps a record
written with an ``expire_at`` already past, by a skewed host or a fake clock, for the rest of
its run). The job object itself is never deleted (an empty object keeps the version chain).

Cost: every commit rewrites the whole job object, so a commit's bytes grow with the job's
records (ledger pages of recent runs): see ``docs/object-storage.md``. An object past
``max_object_bytes`` is refused (``ContentRefused``) before anything is sent.
"""

from __future__ import annotations

import copy
import json
import random
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote

from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    ConfigurationError,
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
    apply_merge,
    decode_json,
)
from cronwarden.model.text import has_surrogate

from .objects import ConditionalObjects, PreconditionFailed

FORMAT = 1
JOBS_FOLDER = "jobs/"
SUFFIX = ".json"
DEFAULT_MAX_OBJECT_BYTES = 32 * 1024 * 1024

#: kind -> id -> (version, data, written at: epoch seconds by the writer's store clock)
Records = dict[str, dict[str, tuple[str, dict[str, Any], int]]]
DEFAULT_MIN_RETENTION = timedelta(days=1)


@dataclass(frozen=True)
class _JobObject:
    """A job object as read or written: its version (``None``: absent) and records."""

    version: str | None
    records: Records = field(default_factory=dict)
    write: str = ""


def object_name(prefix: str, job: str) -> str:
    """The object holding every record of ``job``."""
    return f"{prefix}{JOBS_FOLDER}{quote(job, safe='')}{SUFFIX}"


def job_of(prefix: str, name: str) -> str | None:
    """The job an object name holds, or ``None`` for an object that is not a job object."""
    head = prefix + JOBS_FOLDER
    if not name.startswith(head) or not name.endswith(SUFFIX):
        return None
    return unquote(name[len(head) : -len(SUFFIX)])


def encode(job: str, write: str, records: Records) -> bytes:
    body = {
        "format": FORMAT,
        "job": job,
        "write": write,
        "records": {
            kind: {rid: list(entry) for rid, entry in entries.items()}
            for kind, entries in records.items()
            if entries
        },
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _refuse_surrogates(ops: list[Op]) -> None:
    """A lone surrogate in a key or in data: :class:`ContentRefused`, nothing sent. JSON with
    ``ensure_ascii`` could carry it as an escape, but no other store can hold it (it has no
    UTF-8), so a job's state stays movable between stores (``cronwarden migrate``)."""
    for op in ops:
        where = f"{op.key.kind} {op.key.job}/{op.key.id}"
        if has_surrogate(op.key.job + op.key.id):
            raise ContentRefused(f"{where!a}: a lone surrogate in the key")
        if isinstance(op, Delete):
            continue
        parts = [op.fields, op.increments, op.maximums] if isinstance(op, Merge) else [op.data]
        for part in parts:
            if part and has_surrogate(json.dumps(part, ensure_ascii=False, default=str)):
                raise ContentRefused(f"{where!a}: a lone surrogate in the data; nothing applied")


def decode(name: str, raw: bytes, version: str) -> _JobObject:
    try:
        body = decode_json(raw.decode("utf-8"))
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ValueError("not a cronwarden job object")
        records: Records = {
            kind: {rid: (str(e[0]), e[1], int(e[2])) for rid, e in entries.items()}
            for kind, entries in body["records"].items()
        }
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ConfigurationError(
            f"object {name!r} is not a cronwarden job object (format {FORMAT}): {exc}"
        ) from None
    return _JobObject(version, records, str(body.get("write") or ""))


def _expired(
    entry: tuple[str, Mapping[str, Any], int], now: datetime, min_retention: timedelta
) -> bool:
    """Past its ``expire_at`` and written more than ``min_retention`` ago (a writer whose
    ``expire_at`` lies in the past, a fake clock in a test, a skewed host, must not lose the
    record it just wrote on the next write of the object)."""
    if entry[2] + min_retention.total_seconds() > now.timestamp():
        return False
    value = entry[1].get("expire_at")
    if not isinstance(value, str):
        return False
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when < now


def apply_ops(
    records: Records,
    ops: list[Op],
    write: str,
    now: datetime,
    min_retention: timedelta = DEFAULT_MIN_RETENTION,
) -> tuple[Records, list[Version]]:
    """The job's records after ``ops`` (a new mapping; ``records`` is not changed) and the
    version of each op; raises :class:`CommitConflict` at the first op whose precondition
    fails. Expired records no op touches are dropped."""
    touched = {(op.key.kind, op.key.id) for op in ops}
    result: Records = {
        kind: {
            rid: entry
            for rid, entry in entries.items()
            if (kind, rid) in touched or not _expired(entry, now, min_retention)
        }
        for kind, entries in records.items()
    }
    versions: list[Version] = []
    written = int(now.timestamp())
    for index, op in enumerate(ops):
        kind, rid = op.key.kind, op.key.id
        entries = result.setdefault(kind, {})
        current = entries.get(rid)
        if isinstance(op, Create):
            if current is not None:
                raise CommitConflict(index, "exists", f"{kind} {op.key.job}/{rid}")
            entries[rid] = (write, copy.deepcopy(dict(op.data)), written)
            versions.append(write)
        elif isinstance(op, Update):
            if current is None or current[0] != op.version:
                raise CommitConflict(index, "version", f"{kind} {op.key.job}/{rid}")
            entries[rid] = (write, copy.deepcopy(dict(op.data)), written)
            versions.append(write)
        elif isinstance(op, Delete):
            if current is None or current[0] != op.version:
                raise CommitConflict(index, "version", f"{kind} {op.key.job}/{rid}")
            del entries[rid]
            versions.append(None)
        elif isinstance(op, Merge):
            merged = apply_merge(None if current is None else current[1], op)
            entries[rid] = (write, copy.deepcopy(merged), written)
            versions.append(write)
        else:  # pragma: no cover - check_commit admits the four op types only
            raise TypeError(f"unknown op {op!r}")
    return result, versions


class ObjectStore(Store):
    """Records in one object per job on a :class:`~.objects.ConditionalObjects` client (see the
    module docstring for the layout and the commit protocol). Thread-safe when the client is.

    ``prefix`` namespaces the objects (``"team-a/"``); ``clock`` (a ``datetime`` in UTC) decides
    which records have expired; ``min_retention``: how long a record is kept after its last
    write whatever its ``expire_at`` says.
    """

    #: one conditional write carries the whole commit: increments and maximums are applied
    #: to the object read, inside the same compare-and-set
    capabilities = StoreCapabilities(max_commit_ops=500, max_page_bytes=256_000)
    attempts = 64  #: conditional writes of one commit that may lose a race before giving up
    read_threads = 8  #: parallel reads of changed job objects in a query across jobs

    def __init__(
        self,
        objects: ConditionalObjects,
        prefix: str = "",
        *,
        max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
        clock: Callable[[], datetime] | None = None,
        min_retention: timedelta = DEFAULT_MIN_RETENTION,
    ) -> None:
        super().__init__()
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        self.objects = objects
        self.prefix = prefix
        self.max_object_bytes = max_object_bytes
        self._clock = clock or (lambda: datetime.now(UTC))
        self.min_retention = min_retention
        self._cache: dict[str, _JobObject] = {}
        self._cache_lock = threading.Lock()
        self._closed = False

    # -- the cache of job objects (validated by every conditional write) --------------------
    def _cached(self, job: str) -> _JobObject | None:
        with self._cache_lock:
            return self._cache.get(job)

    def _remember(self, job: str, found: _JobObject) -> None:
        with self._cache_lock:
            self._cache[job] = found

    def _forget(self, job: str) -> None:
        with self._cache_lock:
            self._cache.pop(job, None)

    def _read(self, job: str) -> _JobObject:
        """The job object as stored now (one request; the caller counts it)."""
        name = object_name(self.prefix, job)
        blob = self.objects.get(name)
        if blob is None:
            self._forget(job)
            return _JobObject(None)
        cached = self._cached(job)
        if cached is not None and cached.version == blob.version:
            return cached
        found = decode(name, blob.data, blob.version)
        self._remember(job, found)
        return found

    # -- the port ---------------------------------------------------------------------------
    def _get(self, key: Key) -> Record | None:
        entry = self._read(key.job).records.get(key.kind, {}).get(key.id)
        if entry is None:
            return None
        return Record(key, copy.deepcopy(entry[1]), entry[0])

    def _commit(self, ops: list[Op]) -> list[Version]:
        _refuse_surrogates(ops)
        job, kind = ops[0].key.job, ops[0].key.kind
        name = object_name(self.prefix, job)
        write = secrets.token_hex(16)
        current = self._cached(job) or _JobObject(None)
        fresh, sent, races = False, 0, 0
        while True:
            try:
                records, versions = apply_ops(
                    current.records, ops, write, self._clock(), self.min_retention
                )
            except CommitConflict:
                if fresh:
                    raise
                self._round_trip("read", kind)
                current, fresh = self._read(job), True
                continue
            body = encode(job, write, records)
            if len(body) > self.max_object_bytes:
                raise ContentRefused(
                    f"job {job!r}: its object would hold {len(body)} bytes, past the limit of "
                    f"{self.max_object_bytes} (fewer or smaller ledger items per run, or a "
                    "shorter retention)"
                )
            if sent:
                self._round_trip("commit", kind, len(ops))
            sent += 1
            try:
                if current.version is None:
                    version = self.objects.put_if_absent(name, body)
                else:
                    version = self.objects.put_if_version(name, body, current.version)
            except PreconditionFailed:
                races += 1
                self._forget(job)
                if races >= self.attempts:
                    raise StoreUnavailable(
                        f"{self.objects.service}: {races} conditional writes of job {job!r}'s "
                        "object lost races to other writers; nothing applied"
                    ) from None
                if races > 1:  # jitter so that racing writers do not collide in step
                    time.sleep(random.uniform(0, min(0.2, 0.005 * 2**races)))
                self._round_trip("read", kind)
                current, fresh = self._read(job), True
                continue
            except CommitOutcomeUnknown:
                self._forget(job)
                raise
            self._remember(job, _JobObject(version, records, write))
            return versions

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:
        found = [(job, self._read(job))] if job is not None else self._read_all(kind)
        result: list[Record] = []
        for name, job_object in sorted(found, key=lambda pair: pair[0]):
            entries = job_object.records.get(kind, {})
            for rid in sorted(entries):
                if not rid.startswith(prefix):
                    continue
                if (start is not None and rid < start) or (end is not None and rid >= end):
                    continue
                version, data, _ = entries[rid]
                result.append(Record(Key(kind, name, rid), copy.deepcopy(data), version))
                if limit is not None and len(result) >= limit:
                    return result
        return result

    def _read_all(self, kind: str) -> list[tuple[str, _JobObject]]:
        """Every job object, read again only when its listed version is not the cached one
        (the listing's first page is the query's own round trip; the reads run on up to
        :attr:`read_threads` threads)."""
        cached: dict[str, _JobObject] = {}
        stale: list[str] = []
        for page, entries in enumerate(self.objects.list(self.prefix + JOBS_FOLDER)):
            if page:
                self._round_trip("read", kind)
            for name, version in entries:
                job = job_of(self.prefix, name)
                if job is None:
                    continue
                known = self._cached(job)
                if known is not None and known.version == version:
                    cached[job] = known
                else:
                    stale.append(job)

        def read(job: str) -> tuple[str, _JobObject]:
            self._round_trip("read", kind)
            return job, self._read(job)

        if len(stale) > 1 and self.read_threads > 1:
            with ThreadPoolExecutor(min(self.read_threads, len(stale))) as pool:
                cached.update(pool.map(read, stale))
        else:
            cached.update(map(read, stale))
        return [(job, found) for job, found in cached.items() if found.version is not None]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.objects.close()

    def __repr__(self) -> str:
        return f"ObjectStore({self.objects!r}, prefix={self.prefix!r})"


__all__ = ["ObjectStore", "apply_ops", "decode", "encode", "job_of", "object_name"]
