"""SQLite connections shared by the local store and queue: WAL, one connection per thread."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: how long a statement waits for another process's write lock before SQLite reports the
#: database busy (the store then raises StoreUnavailable and the caller backs off): short, so a
#: writer stopped inside a transaction (SIGSTOP, a debugger) stalls the others for seconds, not
#: half a minute; callers retry with backoff instead of waiting inside SQLite.
BUSY_TIMEOUT_MS = 5_000


class CommitFailed(sqlite3.OperationalError):
    """The ``COMMIT`` statement itself failed (the transaction was then rolled back). Busy at
    commit means nothing was applied; an I/O error there may have left the commit durable."""


class Database:
    """Per-thread connections to one SQLite file, with ``BEGIN IMMEDIATE`` write transactions.

    SQLite's file locks make transactions atomic across processes; WAL lets readers proceed
    while one writer commits.
    """

    def __init__(self, path: str, schema: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        with self.write() as conn:
            for statement in filter(None, (s.strip() for s in schema.split(";"))):
                conn.execute(statement)

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._guard:
                self._all.append(conn)
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction taken at once (no lock upgrade deadlocks between processes).

        Callers do their preparation (encoding, merging what they can) before entering, so the
        file lock is held only for the reads and writes themselves."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise CommitFailed(str(exc)) from exc

    def close(self) -> None:
        with self._guard:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()
