"""SQLite connections shared by the local store and queue: WAL, one connection per thread, and
SQLite's failures mapped to the port's outcomes in one place (:func:`translated`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from cronwarden.model.errors import CommitOutcomeUnknown, StoreUnavailable

#: how long a statement waits for another process's write lock before SQLite reports the
#: database busy (the store then raises StoreUnavailable and the caller backs off): short, so a
#: writer stopped inside a transaction (SIGSTOP, a debugger) stalls the others for seconds, not
#: half a minute; callers retry with backoff instead of waiting inside SQLite.
BUSY_TIMEOUT_MS = 5_000


class CommitFailed(sqlite3.OperationalError):
    """The ``COMMIT`` statement itself failed (the transaction was then rolled back). Busy at
    commit means nothing was applied; an I/O error there may have left the commit durable."""


#: SQLite's primary result codes that mean "another connection holds the lock": the statement
#: was not applied and may be sent again (SQLITE_BUSY, SQLITE_LOCKED)
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
#: primary codes of a file that cannot be used right now (I/O error, disk full, cannot open)
_FAULT_CODES = frozenset({sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN})
_BUSY_TEXT = ("database is locked", "database is busy", "database table is locked")
_FAULT_TEXT = ("unable to open", "disk i/o error", "disk is full")


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the database is busy or locked by another connection."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _BUSY_CODES:
        return True
    text = str(exc).lower()
    return any(busy in text for busy in _BUSY_TEXT)


def _is_fault(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _FAULT_CODES:
        return True
    text = str(exc).lower()
    return any(fault in text for fault in _FAULT_TEXT)


@contextmanager
def translated(where: str, what: str) -> Iterator[None]:
    """SQLite's operational failures inside the block as the port's outcomes, in one line naming
    ``where`` (the file) and ``what`` (the operation):

    * busy or locked (another process holds the write lock past the busy timeout: a writer
      stopped or stuck inside a transaction), before or at ``COMMIT``: StoreUnavailable (the
      transaction was rolled back or never begun: nothing applied, the caller retries);
    * unable to open, I/O error or disk full before the commit: StoreUnavailable;
    * any other failure of the ``COMMIT`` statement itself (I/O error while making it durable):
      CommitOutcomeUnknown.

    Any other error (a constraint, a bug) propagates as it is.
    """
    try:
        yield
    except CommitFailed as exc:
        if is_busy(exc):
            raise StoreUnavailable(
                f"{where}: {what}: busy at commit, nothing applied: {exc}"
            ) from exc
        raise CommitOutcomeUnknown(f"{where}: {what}: commit outcome unknown: {exc}") from exc
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise StoreUnavailable(
                f"{where} unavailable: {what}: {exc} (another process holds its write lock past "
                "the busy timeout: a stopped or stuck writer?); nothing applied, retry later"
            ) from exc
        if _is_fault(exc):
            raise StoreUnavailable(f"{where} unavailable: {what}: {exc}; nothing applied") from exc
        raise


class Database:
    """Per-thread connections to one SQLite file, with ``BEGIN IMMEDIATE`` write transactions.

    SQLite's file locks make transactions atomic across processes; WAL lets readers proceed
    while one writer commits.
    """

    def __init__(
        self,
        path: str,
        schema: str,
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        where: str = "SQLite database",
    ) -> None:
        """Opens ``path`` and creates ``schema``; raises StoreUnavailable (one line naming the
        file) when the file is locked past the busy timeout or cannot be opened."""
        self.path = path
        #: how errors name this database: ``"<where> <path>"``
        self.where = f"{where} {path}"
        self.busy_timeout_ms = busy_timeout_ms
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        with self.translated("opening the database"), self.write() as conn:
            for statement in filter(None, (s.strip() for s in schema.split(";"))):
                conn.execute(statement)

    def translated(self, what: str) -> contextlib.AbstractContextManager[None]:
        """:func:`translated` for this database's file."""
        return translated(self.where, what)

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
            # a failed statement may have ended the transaction already: the error raised is
            # the one to report, not "no transaction is active"
            with contextlib.suppress(sqlite3.Error):
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
