"""SQLite implementation of the :class:`~cronwarden.ports.Store` port."""

from __future__ import annotations

import json
from typing import Any

from cronwarden.errors import CommitConflict
from cronwarden.ports import Create, Delete, Key, Op, Record, Store, Update, Version

from ._db import Database

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL, job TEXT NOT NULL, id TEXT NOT NULL,
    data TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (kind, job, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS version_clock (one INTEGER PRIMARY KEY CHECK (one = 1), value INTEGER);
INSERT OR IGNORE INTO version_clock VALUES (1, 0)
"""


class SQLiteStore(Store):
    """Records in one SQLite table; each commit is one ``BEGIN IMMEDIATE`` transaction.

    Versions come from one database-wide counter, so a version never repeats for a key even
    when the record is deleted and created again (a stale writer can never match).
    """

    max_commit_ops = 10_000

    def __init__(self, path: str) -> None:
        super().__init__()
        self._db = Database(path, _SCHEMA)

    def _get(self, key: Key) -> Record | None:
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
        with self._db.write() as conn:
            (clock,) = conn.execute(
                "UPDATE version_clock SET value = value + 1 RETURNING value"
            ).fetchone()
            versions: list[Version] = []
            for index, op in enumerate(ops):
                k = op.key
                row = conn.execute(
                    "SELECT data, version FROM records WHERE kind=? AND job=? AND id=?",
                    (k.kind, k.job, k.id),
                ).fetchone()
                if isinstance(op, Create):
                    if row is not None:
                        raise CommitConflict(index, "exists", f"{k.kind} {k.job}/{k.id}")
                    data: dict[str, Any] = dict(op.data)
                elif isinstance(op, Update | Delete):
                    if row is None or row[1] != op.version:
                        raise CommitConflict(index, "version", f"{k.kind} {k.job}/{k.id}")
                    if isinstance(op, Delete):
                        conn.execute(
                            "DELETE FROM records WHERE kind=? AND job=? AND id=?",
                            (k.kind, k.job, k.id),
                        )
                        versions.append(None)
                        continue
                    data = dict(op.data)
                else:
                    data = json.loads(row[0]) if row else {}
                    data.update(op.fields)
                    for name, amount in op.increments.items():
                        data[name] = int(data.get(name) or 0) + amount
                    for name, floor in op.maximums.items():
                        current = data.get(name)
                        data[name] = floor if current is None else max(int(current), floor)
                conn.execute(
                    "INSERT OR REPLACE INTO records (kind, job, id, data, version) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (k.kind, k.job, k.id, json.dumps(data, separators=(",", ":")), clock),
                )
                versions.append(clock)
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
        rows = self._db.connection().execute(" ".join(sql), args).fetchall()
        return [Record(Key(kind, r[0], r[1]), json.loads(r[2]), r[3]) for r in rows]

    def close(self) -> None:
        self._db.close()
