"""SQLite implementation of the :class:`~cronwarden.model.ports.Store` port."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    ContentRefused,
    StoreUnavailable,
)
from cronwarden.model.ports import (
    DUE_FIELDS,
    STATUS,
    Create,
    Delete,
    Key,
    Op,
    Record,
    Store,
    StoreCapabilities,
    Update,
    Version,
    apply_merge,
    decode_json,
)
from cronwarden.model.text import storable

from ._db import BUSY_TIMEOUT_MS, CommitFailed, Database

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL, job TEXT NOT NULL, id TEXT NOT NULL,
    data TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (kind, job, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_due ON records
    ((CASE WHEN json_valid(data) THEN json_extract(data, '$.due_at') END)) WHERE kind = 'status';
CREATE INDEX IF NOT EXISTS records_watch_due ON records
    ((CASE WHEN json_valid(data) THEN json_extract(data, '$.watch_due') END))
    WHERE kind = 'status';
CREATE TABLE IF NOT EXISTS version_clock (one INTEGER PRIMARY KEY CHECK (one = 1), value INTEGER);
INSERT OR IGNORE INTO version_clock VALUES (1, 0)
"""


#: the due query: one range scan of each due field's index (``query_due``)
_DUE_SQL = " UNION ".join(
    f"SELECT job, id, data, version FROM records INDEXED BY {index} "  # noqa: S608
    f"WHERE kind = 'status' "
    f"AND (CASE WHEN json_valid(data) THEN json_extract(data, '$.{name}') END) <= ? "
    f"AND json_type(data, '$.{name}') = 'integer'"
    for name, index in zip(DUE_FIELDS, ("records_due", "records_watch_due"), strict=True)
)


class SQLiteStore(Store):
    """Records in one SQLite table; each commit is one ``BEGIN IMMEDIATE`` transaction.

    Versions come from one database-wide counter, so a version never repeats for a key even
    when the record is deleted and created again (a stale writer can never match). A database
    still locked by another writer after the busy timeout, or a file that cannot be opened,
    raises :class:`~cronwarden.model.errors.StoreUnavailable` (the transaction was rolled back), in
    one line naming the file; an I/O error on the ``COMMIT`` statement itself raises
    :class:`~cronwarden.model.errors.CommitOutcomeUnknown` (the commit may be durable).

    ``busy_timeout``: seconds to wait for another process's write lock (default 5).
    """

    capabilities = StoreCapabilities(max_commit_ops=10_000, max_page_bytes=1_000_000)

    def __init__(self, path: str, *, busy_timeout: float = BUSY_TIMEOUT_MS / 1000) -> None:
        super().__init__()
        self.path = path
        self._db = Database(path, _SCHEMA, busy_timeout_ms=int(busy_timeout * 1000))

    def _get(self, key: Key) -> Record | None:
        with _unavailable_on_busy(self.path):
            return self._read(key)

    def _read(self, key: Key) -> Record | None:
        row = (
            self._db.connection()
            .execute(
                "SELECT data, version FROM records WHERE kind=? AND job=? AND id=?",
                (key.kind, key.job, key.id),
            )
            .fetchone()
        )
        return Record(key, json.loads(row[0]), row[1]) if row else None

    def _commit(self, ops: list[Op]) -> list[Version]:
        try:
            with _unavailable_on_busy(self.path):
                return self._write(ops)
        except (UnicodeEncodeError, sqlite3.DataError) as exc:
            # text SQLite cannot take as UTF-8 (a lone surrogate in a record id), a value
            # past its size limit: refused before anything was applied (rolled back)
            raise ContentRefused(
                f"SQLite store {self.path} cannot hold this commit ({type(exc).__name__}: "
                f"{storable(str(exc), 300)}); nothing applied"
            ) from exc

    def _write(self, ops: list[Op]) -> list[Version]:
        # The ops touch distinct records of one job (checked by the port), so reading them all
        # first and writing them all after is the same as applying them one by one; it costs a
        # few statements per commit instead of two per op (the ledger commits 200-op batches).
        # Whole records are encoded before the transaction: the file lock is held only for
        # the reads and writes.
        encoded = {
            index: _encode(op.data)
            for index, op in enumerate(ops)
            if isinstance(op, Create | Update)
        }
        with self._db.write() as conn:
            (clock,) = conn.execute(
                "UPDATE version_clock SET value = value + 1 RETURNING value"
            ).fetchone()
            rows = _read_rows(conn, ops)
            versions: list[Version] = []
            writes: list[tuple[str, str, str, str, int]] = []
            deletes: list[tuple[str, str, str]] = []
            for index, op in enumerate(ops):
                k = op.key
                row = rows.get((k.kind, k.id))
                if isinstance(op, Create):
                    if row is not None:
                        raise CommitConflict(index, "exists", f"{k.kind} {k.job}/{k.id}")
                    text = encoded[index]
                elif isinstance(op, Update | Delete):
                    if row is None or row[1] != op.version:
                        raise CommitConflict(index, "version", f"{k.kind} {k.job}/{k.id}")
                    if isinstance(op, Delete):
                        deletes.append((k.kind, k.job, k.id))
                        versions.append(None)
                        continue
                    text = encoded[index]
                else:
                    text = _encode(apply_merge(json.loads(row[0]) if row else None, op))
                writes.append((k.kind, k.job, k.id, text, clock))
                versions.append(clock)
            if deletes:
                conn.executemany("DELETE FROM records WHERE kind=? AND job=? AND id=?", deletes)
            if writes:
                conn.executemany(
                    "INSERT OR REPLACE INTO records (kind, job, id, data, version) "
                    "VALUES (?, ?, ?, ?, ?)",
                    writes,
                )
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
        sql = ["SELECT job, id, data, version FROM records WHERE kind = ?"]
        args: list[Any] = [kind]
        if job is not None:
            sql.append("AND job = ?")
            args.append(job)
        if prefix:
            sql.append("AND substr(id, 1, ?) = ?")
            args += [len(prefix), prefix]
        if start is not None:
            sql.append("AND id >= ?")
            args.append(start)
        if end is not None:
            sql.append("AND id < ?")
            args.append(end)
        sql.append("ORDER BY job, id")
        if limit is not None:
            sql.append("LIMIT ?")
            args.append(limit)
        with _unavailable_on_busy(self.path):
            rows = self._db.connection().execute(" ".join(sql), args).fetchall()
        datas = _decode_all([r[2] for r in rows])
        return [Record(Key(kind, r[0], r[1]), d, r[3]) for r, d in zip(rows, datas, strict=True)]

    def _query_due(self, before: int) -> list[Record]:
        """Two index range scans (``records_due_at``, ``records_watch_due``), one statement."""
        self._round_trip("query", STATUS)
        with _unavailable_on_busy(self.path):
            rows = self._db.connection().execute(_DUE_SQL, [before] * len(DUE_FIELDS)).fetchall()
        datas = _decode_all([r[2] for r in rows])
        return [Record(Key(STATUS, r[0], r[1]), d, r[3]) for r, d in zip(rows, datas, strict=True)]

    def close(self) -> None:
        self._db.close()


def _encode(data: Any) -> str:
    # Not ASCII-escaped: a lone surrogate then fails the UTF-8 encoding of the statement
    # (ContentRefused) instead of being stored as an escape that a JSON decoder merges with
    # a neighbouring one into another character.
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _decode_all(texts: list[str]) -> list[Any]:
    """The JSON documents ``texts`` (written by :func:`_encode`), each through
    :func:`~cronwarden.model.ports.decode_json` (the C scanner alone: a 10,000-record status
    query)."""
    return [decode_json(text) for text in texts]


_BUSY = ("database is locked", "database is busy")
_UNAVAILABLE = (*_BUSY, "unable to open", "disk i/o error", "disk is full")


@contextlib.contextmanager
def _unavailable_on_busy(path: str = "") -> Iterator[None]:
    """SQLite's failures as the port's outcomes, in one line naming the state file:

    * busy / locked (another process holds the write lock past the busy timeout), unable to
      open, I/O error or disk full before the commit: StoreUnavailable (rolled back or never
      begun, nothing applied);
    * busy on the ``COMMIT`` statement: StoreUnavailable (still not applied: rolled back);
    * any other failure of the ``COMMIT`` statement (I/O error while making it durable):
      CommitOutcomeUnknown.
    """
    where = f"SQLite store {path}" if path else "SQLite store"
    try:
        yield
    except CommitFailed as exc:
        text = str(exc).lower()
        if any(busy in text for busy in _BUSY):
            raise StoreUnavailable(f"{where} busy at commit, nothing applied: {exc}") from exc
        raise CommitOutcomeUnknown(f"{where}: commit outcome unknown: {exc}") from exc
    except sqlite3.OperationalError as exc:
        text = str(exc).lower()
        if any(busy in text for busy in _BUSY):
            raise StoreUnavailable(
                f"{where} unavailable: {exc} (another process holds its write lock past the "
                "busy timeout: a stopped or stuck writer?); nothing applied, retry later"
            ) from exc
        if any(fault in text for fault in _UNAVAILABLE):
            raise StoreUnavailable(f"{where} unavailable: {exc}; nothing applied") from exc
        raise


_IN_CHUNK = 500  #: ids per ``IN (...)`` (SQLite allows at least 999 parameters)
_SELECT_IN = "SELECT id, data, version FROM records WHERE kind=? AND job=? AND id IN ({marks})"


def _read_rows(conn: sqlite3.Connection, ops: list[Op]) -> dict[tuple[str, str], tuple[str, int]]:
    """``(kind, id) -> (data, version)`` of the records ``ops`` touch that exist (one job)."""
    job = ops[0].key.job
    ids: dict[str, list[str]] = {}
    for op in ops:
        ids.setdefault(op.key.kind, []).append(op.key.id)
    found: dict[tuple[str, str], tuple[str, int]] = {}
    for kind, wanted in ids.items():
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start : start + _IN_CHUNK]
            sql = _SELECT_IN.format(marks=",".join("?" * len(chunk)))
            for record_id, data, version in conn.execute(sql, (kind, job, *chunk)):
                found[(kind, record_id)] = (data, version)
    return found
