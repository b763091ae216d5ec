"""PostgreSQL implementation of the :class:`~cronwarden.model.ports.Store` port.

* Records live in ``<schema>.records`` (``kind, job, id`` primary key, ``data jsonb``,
  ``version bigint``, ``expire_at``).
* ``commit`` is **one statement**. Up to :data:`.commit_sql.MAX_OPS` ops (claims,
  completions, renewals): one plain statement of data-modifying CTEs that executes no other
  (:mod:`.commit_sql`); larger commits: ``SELECT <schema>.commit_ops(job, ops)``, a server-side
  function. Both apply the ops in order in the statement's own transaction: create-if-absent
  with ``INSERT … ON CONFLICT DO NOTHING``, compare-and-set with ``UPDATE … WHERE version = $v``,
  delete with the same precondition, and merges as one ``INSERT … ON CONFLICT DO UPDATE`` that
  sets fields, adds increments and raises maxima in place (no read first). The first failing
  precondition raises and rolls the whole commit back (see :mod:`.schema`).
* ``get`` and ``query`` are one ``SELECT`` each; the watcher's "every job status" read is
  ``query(STATUS)``: one indexed query.
* Versions come from one sequence, so they never repeat for a key (delete + re-create included).
* ``expire_at`` (from the records' ``expire_at`` field) is cleaned by a bounded delete that runs
  every ``expire_every`` seconds on a background thread (``expire_batch`` rows at most per
  sweep, ``SKIP LOCKED`` so hosts sweeping at once never wait for each other).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cronwarden.model.errors import CommitConflict, ContentRefused
from cronwarden.model.ports import (
    DUE_FIELDS,
    STATUS,
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
from cronwarden.model.text import unstorable

from . import commit_sql
from .database import Database
from .schema import quoted
from .settings import PostgresSettings

if TYPE_CHECKING:
    import psycopg


class PostgresStore(Store):
    """Records in PostgreSQL; safe for any number of processes on any number of hosts.

    ``settings``: a :class:`PostgresSettings` or a DSN. ``database``: share a pool with the
    queue (the provider does); a store given one does not close it.
    """

    capabilities = StoreCapabilities(max_commit_ops=1000, max_page_bytes=1_000_000)

    def __init__(
        self, settings: PostgresSettings | str, *, database: Database | None = None
    ) -> None:
        super().__init__()
        if isinstance(settings, str):
            settings = PostgresSettings(dsn=settings)
        self.settings = settings
        self._owns_db = database is None
        self.db = database or Database(settings, name="cronwarden-store")
        q = quoted(settings.schema)
        self._sql_get = (
            f"SELECT data, version FROM {q}.records WHERE kind = %s AND job = %s AND id = %s"
        )
        self._sql_commit = f"SELECT {q}.commit_ops(%s, %s::jsonb)"
        self._sql_expire = (
            f"DELETE FROM {q}.records WHERE ctid = ANY(ARRAY("
            f"SELECT ctid FROM {q}.records WHERE expire_at < now() "
            "ORDER BY expire_at LIMIT %s FOR UPDATE SKIP LOCKED))"
        )
        self._q = q
        self.db.every(settings.expire_every, self.expire, "expired-record sweep")

    def _get(self, key: Key) -> Record | None:
        def work(conn: psycopg.Connection[Any]) -> Record | None:
            row = self.db.execute(conn, self._sql_get, (key.kind, key.job, key.id)).fetchone()
            return Record(key, row[0], int(row[1])) if row else None

        return self.db.run(work, what=f"get {key.kind} {key.job}/{key.id}", writes=False)

    def _commit(self, ops: list[Op]) -> list[Version]:
        encoded = [_encode(index, op) for index, op in enumerate(ops)]
        job = ops[0].key.job
        what = f"commit of {len(ops)} op(s) for {job}"
        # a lone surrogate cannot be sent as UTF-8, and jsonb cannot hold NUL (\u0000). What
        # is checked is what is sent: JSON text (where NUL is escaped), the ops' kinds and ids
        # and the merges' counter names, each op serialised once
        if unstorable(job):
            raise _unholdable(what)

        if len(ops) <= commit_sql.MAX_OPS:
            sql = commit_sql.statement(self._q, commit_sql.shape(ops))
            params = commit_sql.parameters(job, encoded)
            if any(type(v) is str and unstorable(v) for v in params.values()):
                raise _unholdable(what)

            def one(conn: psycopg.Connection[Any]) -> list[Version]:
                row = self.db.execute(conn, sql, params).fetchone()
                if row is None or row[0] is None:
                    raise RuntimeError("a commit statement returned no version")
                clock = int(row[0])
                return [None if isinstance(op, Delete) else clock for op in ops]

            return self._run_commit(one, what)

        payload = json.dumps(encoded, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        if unstorable(payload):
            raise _unholdable(what)

        def work(conn: psycopg.Connection[Any]) -> list[Version]:
            row = self.db.execute(conn, self._sql_commit, (job, payload)).fetchone()
            versions = list(row[0]) if row else []
            if len(versions) != len(ops):
                raise RuntimeError(f"commit_ops returned {len(versions)} versions for {len(ops)}")
            return [None if v is None else int(v) for v in versions]

        return self._run_commit(work, what)

    def _run_commit(
        self, work: Callable[[psycopg.Connection[Any]], list[Version]], what: str
    ) -> list[Version]:
        try:
            return self.db.run(work, what=what, writes=True)
        except ValueError as exc:
            if _refused_for_content(exc):
                raise ContentRefused(str(exc)) from exc
            raise

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:
        # data as text, decoded here by the C scanner (decode_json): psycopg's jsonb loader is
        # json.loads on bytes, whose encoding detection and whitespace scans per record are a
        # fifth of a 10,000-record status query's decoding
        sql = [f"SELECT job, id, data::text, version FROM {self._q}.records WHERE kind = %s"]
        args: list[Any] = [kind]
        if job is not None:
            sql.append("AND job = %s")
            args.append(job)
        if prefix:
            sql.append("AND starts_with(id, %s)")
            args.append(prefix)
        if start is not None:
            sql.append("AND id >= %s")
            args.append(start)
        if end is not None:
            sql.append("AND id < %s")
            args.append(end)
        sql.append("ORDER BY job, id")
        if limit is not None:
            sql.append("LIMIT %s")
            args.append(limit)
        text = " ".join(sql)

        def work(conn: psycopg.Connection[Any]) -> list[Record]:
            rows = self.db.execute(conn, text, args).fetchall()
            return [Record(Key(kind, r[0], r[1]), decode_json(r[2]), int(r[3])) for r in rows]

        return self.db.run(work, what=f"query {kind}", writes=False)

    def _query_due(self, before: int) -> list[Record]:
        """Two index range scans (``records_due_at``, ``records_watch_due``), one statement."""
        parts = [
            f"SELECT job, id, data::text, version FROM {self._q}.records WHERE kind = 'status' "
            f"AND jsonb_typeof(data -> '{name}') = 'number' "
            f"AND (data ->> '{name}')::numeric <= %s::numeric"
            for name in DUE_FIELDS
        ]
        text = " UNION ".join(parts)

        def work(conn: psycopg.Connection[Any]) -> list[Record]:
            rows = self.db.execute(conn, text, [before] * len(parts)).fetchall()
            return [Record(Key(STATUS, r[0], r[1]), decode_json(r[2]), int(r[3])) for r in rows]

        self._round_trip("query", STATUS)
        return self.db.run(work, what="query due status", writes=False)

    def expire(self, limit: int | None = None) -> int:
        """Delete at most ``limit`` (default ``expire_batch``) records whose ``expire_at`` has
        passed; returns how many. Not a counted round trip (housekeeping, not protocol)."""
        batch = limit or self.settings.expire_batch

        def work(conn: psycopg.Connection[Any]) -> int:
            return int(self.db.execute(conn, self._sql_expire, (batch,)).rowcount)

        return self.db.run(work, what="expired-record sweep", writes=True)

    def close(self) -> None:
        if self._owns_db:
            self.db.close()


def _unholdable(what: str) -> ContentRefused:
    return ContentRefused(
        f"Postgres cannot hold the {what}: it holds a NUL character or a lone surrogate; "
        "nothing was sent"
    )


def _refused_for_content(exc: ValueError) -> bool:
    """Whether ``exc`` is the server refusing the data itself (SQLSTATE class 22, data
    exception: untranslatable character, a value out of range, ...), as the database's error
    mapping reports it, or text the driver could not encode."""
    if isinstance(exc, UnicodeError):
        return True
    cause = exc.__cause__
    return str(getattr(cause, "sqlstate", None) or "").startswith("22")


def _encode(index: int, op: Op) -> dict[str, Any]:
    """One op as the JSON object ``commit_ops`` reads (see :mod:`.schema`)."""
    k = op.key
    if isinstance(op, Create):
        return {"t": "c", "k": k.kind, "i": k.id, "d": dict(op.data), "e": _expire_at(op.data)}
    if isinstance(op, Update | Delete):
        if isinstance(op.version, bool) or not isinstance(op.version, int):
            # Not a version this store ever handed out: the precondition cannot hold.
            raise CommitConflict(index, "version", f"{k.kind} {k.job}/{k.id}: foreign version")
        if isinstance(op, Delete):
            return {"t": "d", "k": k.kind, "i": k.id, "v": op.version}
        return {
            "t": "u",
            "k": k.kind,
            "i": k.id,
            "d": dict(op.data),
            "v": op.version,
            "e": _expire_at(op.data),
        }
    if isinstance(op, Merge):
        return {
            "t": "m",
            "k": k.kind,
            "i": k.id,
            "f": dict(op.fields),
            "n": dict(op.increments),
            "x": dict(op.maximums),
            "e": _expire_at(op.fields),
        }
    raise TypeError(f"unknown op {op!r}")


def _expire_at(data: Any) -> str | None:
    """The record's ``expire_at`` as normalised ISO text, or ``None`` (absent or unparsable:
    the record is then kept, never deleted early)."""
    value = data.get("expire_at") if hasattr(data, "get") else None
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.isoformat() if parsed.tzinfo else None
