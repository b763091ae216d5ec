"""One connection pool per process, shared by the store and the queue, with the driver's errors
mapped to the store's three outcomes in one place.

* A precondition refused inside a commit (SQLSTATE ``CW001`` / ``CW002`` from
  ``commit_ops``), a unique violation, or a serialization failure / deadlock that persists
  after :data:`SERIALIZATION_RETRIES` immediate retries -> :class:`CommitConflict`.
* No connection (refused, DNS, authentication, pool timeout) before anything was sent, or a
  statement cancelled by ``statement_timeout`` (rolled back) -> :class:`StoreUnavailable`.
* The connection failed after a write was sent (no SQLSTATE, class ``08``, or ``57P0x``) ->
  :class:`CommitOutcomeUnknown` (the server may have committed before the reply was lost).
  Reads that fail this way are ``StoreUnavailable``. An operational error the server reported
  with any other SQLSTATE (disk full, out of memory, too many connections) rolled the
  transaction back -> :class:`StoreUnavailable`.

A server restart (or a backend terminated by an administrator) leaves every idle pooled
connection stale: the server sent it ``57P01`` and closed it. Each connection is validated when
it leaves the pool, without a round trip (:func:`_stale`: closed, broken, or its socket readable,
which an idle connection never is unless the server ended the session), and replaced when stale;
a read that meets a connection lost after that check is sent once more on a fresh one. So a
restart costs no operation an error once the server accepts connections again (statements in
flight while it stopped keep their outcome: unknown for a write).

Every message passes through :func:`~cronwarden.model.redaction.redact` and names the server by its
redacted DSN: the password never reaches a log line or an error snippet.

psycopg and psycopg_pool are imported when a :class:`Database` is built, never before.
"""

from __future__ import annotations

import contextlib
import logging
import math
import select
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    ConfigurationError,
    StoreUnavailable,
)
from cronwarden.model.redaction import redact

from .schema import CONFLICT_EXISTS, CONFLICT_VERSION, migrate
from .settings import PostgresSettings

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

log = logging.getLogger("cronwarden.postgres")
T = TypeVar("T")
SERIALIZATION_RETRIES = 3
CLIENT_GRACE = 5.0  #: seconds past statement_timeout before the client gives up on the server
#: reads sent again on a fresh connection after theirs was lost (a read is safe to repeat)
READ_RECONNECTS = 1
EXTRA_HINT = "pip install 'cronwarden[postgres]'"


def import_driver() -> tuple[Any, Any]:
    """``(psycopg, psycopg_pool)``, or a ConfigurationError naming the extra to install."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ConfigurationError(
            f"the Postgres provider needs psycopg 3 and psycopg_pool ({EXTRA_HINT}): {exc}"
        ) from exc
    return psycopg, psycopg_pool


class Database:
    """A psycopg connection pool (autocommit connections) for one settings object.

    The schema is migrated on first use (so a host may start while the database is down and
    reports :class:`StoreUnavailable` per operation until it is back). :attr:`statements`
    counts every statement sent, for round-trip measurements.
    """

    def __init__(self, settings: PostgresSettings, *, name: str = "cronwarden") -> None:
        psycopg, pool_module = import_driver()
        self._psycopg = psycopg
        self.settings = settings
        self._where = settings.display_dsn
        self._lock = threading.Lock()
        self._migrated = False
        self.statements = 0
        self._closed = False
        self.pool: ConnectionPool[Any] = pool_module.ConnectionPool(
            settings.dsn,
            min_size=settings.pool_min,
            max_size=settings.pool_max,
            timeout=settings.pool_timeout,
            kwargs=self.connect_kwargs(name),
            open=False,
            name=name,
        )
        _hot_first(self.pool)
        self.pool.open(wait=False)
        self._sweeper: _Sweeper | None = None
        #: seconds a call may wait for the server before its connection is severed: the
        #: server's own statement_timeout fires first unless the server cannot answer at all
        #: (frozen, partitioned), which would otherwise block the caller until it is back.
        self.deadline = settings.statement_timeout + CLIENT_GRACE
        self._watchdog = _Watchdog()

    def connect_kwargs(self, name: str) -> dict[str, Any]:
        """Keyword arguments of every connection this database opens (pool and listener)."""
        timeout_ms = int(self.settings.statement_timeout * 1000)
        return {
            "autocommit": True,
            "connect_timeout": max(1, math.ceil(self.settings.connect_timeout)),
            "application_name": name[:63],
            "options": f"-c statement_timeout={timeout_ms}",
        }

    # -- running statements ------------------------------------------------------------------

    def run(
        self,
        work: Callable[[psycopg.Connection[Any]], T],
        *,
        what: str,
        writes: bool,
    ) -> T:
        """``work(conn)`` on a pooled connection, with errors mapped (module docs). ``writes``:
        a lost connection means the outcome is unknown rather than "not applied"."""
        psycopg = self._psycopg
        reconnects = 0 if writes else READ_RECONNECTS
        for attempt in range(1, SERIALIZATION_RETRIES + 2 + reconnects):
            with (
                self._connection(what) as conn,
                self._watchdog.guard(conn, self.deadline) as call,
            ):
                try:
                    return work(conn)
                except psycopg.errors.SerializationFailure as exc:
                    last: BaseException = exc
                except psycopg.errors.DeadlockDetected as exc:
                    last = exc
                except psycopg.Error as exc:
                    lost = (conn.broken or conn.closed) and not call.severed
                    if reconnects and lost and not self._closed:
                        # the connection died under a read (a restart racing the check; not
                        # the watchdog giving up on a server that does not answer): nothing
                        # was changed, so read again on a fresh connection
                        reconnects -= 1
                        log.info("%s: connection lost (%s); reading again", what, redact(str(exc)))
                        last = exc
                        continue
                    raise self._translate(exc, what=what, writes=writes) from exc
            log.debug("%s: %s, retry %s", what, type(last).__name__, attempt)
        raise CommitConflict(
            0, "version", redact(f"{what}: {type(last).__name__} after retries: {last}")
        ) from last

    def execute(
        self, conn: psycopg.Connection[Any], query: Any, params: Any = None
    ) -> psycopg.Cursor[Any]:
        """``conn.execute`` that counts the statement in :attr:`statements`."""
        with self._lock:
            self.statements += 1
        return conn.execute(query, params)

    @contextlib.contextmanager
    def _connection(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        psycopg = self._psycopg
        if self._closed:
            raise StoreUnavailable(f"{what}: the Postgres provider is closed")
        conn = self._checkout(what)
        try:
            if not self._migrated:
                with self._watchdog.guard(conn, self.deadline):
                    self._migrate(conn, what)
            yield conn
        finally:
            if conn.broken or conn.closed:
                log.debug("discarding a broken connection")
            with contextlib.suppress(psycopg.Error, Exception):
                self.pool.putconn(conn)

    def _checkout(self, what: str) -> psycopg.Connection[Any]:
        """A pooled connection that is not :func:`_stale`; stale ones are closed and handed
        back (the pool opens replacements), at most ``pool_max`` + 1 of them per call."""
        for _ in range(self.settings.pool_max + 1):
            try:
                conn: psycopg.Connection[Any] = self.pool.getconn()
            except Exception as exc:  # PoolTimeout, PoolClosed: nothing was sent
                raise StoreUnavailable(
                    redact(f"{what}: no connection to Postgres at {self._where}: {self._why(exc)}")
                ) from exc
            if not _stale(conn):
                return conn
            log.info("%s: replacing a pooled connection the server closed (restarted?)", what)
            with contextlib.suppress(Exception):
                conn.close()
            with contextlib.suppress(Exception):
                self.pool.putconn(conn)  # closed: the pool discards it and opens another
        raise StoreUnavailable(
            redact(f"{what}: every pooled connection to Postgres at {self._where} was closed")
        )

    def _why(self, exc: BaseException) -> str:
        """Why the pool has no connection: the pool only says it timed out, so try one direct
        connection for the server's own reason (refused, unknown database, authentication)."""
        psycopg = self._psycopg
        try:
            probe = psycopg.connect(self.settings.dsn, **self.connect_kwargs("cronwarden-probe"))
        except psycopg.Error as error:
            return f"{exc}; connecting directly: {str(error).strip()}"
        probe.close()
        return (
            f"{exc}; the server does accept connections: every pooled connection is busy "
            f"(raise CRONWARDEN_POSTGRES_POOL_MAX, now {self.settings.pool_max})"
        )

    def _migrate(self, conn: psycopg.Connection[Any], what: str) -> None:
        psycopg = self._psycopg
        with self._lock:
            if self._migrated:
                return
            try:
                migrate(conn, self.settings.schema)
            except psycopg.Error as exc:
                raise self._translate(exc, what=f"{what} (schema migration)", writes=False) from exc
            self._migrated = True

    def _translate(self, exc: BaseException, *, what: str, writes: bool) -> Exception:
        psycopg = self._psycopg
        errors = psycopg.errors
        state = getattr(exc, "sqlstate", None)
        detail = redact(f"{what} at {self._where}: {type(exc).__name__}: {exc}".strip())
        if state in (CONFLICT_EXISTS, CONFLICT_VERSION):
            diag = getattr(exc, "diag", None)
            index = int(getattr(diag, "message_detail", None) or 0)
            reason = "exists" if state == CONFLICT_EXISTS else "version"
            return CommitConflict(index, reason)
        if isinstance(exc, errors.UniqueViolation):
            return CommitConflict(0, "exists", detail)
        if isinstance(exc, errors.QueryCanceled | errors.LockNotAvailable):
            return StoreUnavailable(f"{detail} (rolled back: nothing applied)")
        if isinstance(exc, errors.DataError):
            hint = " (JSON text in PostgreSQL cannot hold the NUL character \\u0000)"
            nul = isinstance(exc, errors.UntranslatableCharacter)
            return ValueError(f"Postgres refused the data: {detail}{hint if nul else ''}")
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            if writes and not _rolled_back(state):
                return CommitOutcomeUnknown(
                    f"{detail} (the write may have been applied: read back before assuming)"
                )
            return StoreUnavailable(detail)
        return exc if isinstance(exc, Exception) else RuntimeError(detail)

    # -- schema and housekeeping -------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Migrate now (normally done on first use)."""
        self.run(lambda conn: None, what="schema migration", writes=False)

    def every(self, seconds: float, task: Callable[[], object], name: str) -> None:
        """Run ``task`` every ``seconds`` on one background thread (errors logged, not raised)."""
        if seconds <= 0:
            return
        with self._lock:
            if self._sweeper is None:
                self._sweeper = _Sweeper()
            self._sweeper.add(seconds, task, name)

    def close(self) -> None:
        """Stop housekeeping and close every pooled connection. Idempotent."""
        with self._lock:
            self._closed = True
            sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.stop()
        self._watchdog.stop()
        with contextlib.suppress(Exception):
            self.pool.close()


class _Sweeper:
    """Periodic tasks on one daemon thread, each at its own interval."""

    def __init__(self) -> None:
        self._tasks: list[tuple[float, Callable[[], object], str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="cronwarden-pg-sweeper", daemon=True
        )
        self._started = False
        self._guard = threading.Lock()

    def add(self, seconds: float, task: Callable[[], object], name: str) -> None:
        with self._guard:
            self._tasks.append((seconds, task, name))
            if not self._started:
                self._started = True
                self._thread.start()

    def _loop(self) -> None:
        import time

        due: dict[int, float] = {}
        while not self._stop.is_set():
            now = time.monotonic()
            with self._guard:
                tasks = list(self._tasks)
            for i, (seconds, task, name) in enumerate(tasks):
                if due.setdefault(i, now + seconds) <= now:
                    due[i] = now + seconds
                    try:
                        task()
                    except Exception as exc:
                        log.warning("%s failed: %s", name, redact(str(exc)))
            wait = min((due[i] for i in range(len(tasks)) if i in due), default=now + 1) - now
            self._stop.wait(max(0.05, min(wait, 1.0)))

    def stop(self) -> None:
        self._stop.set()
        if self._started:
            self._thread.join(timeout=10)


class _HotFirst(deque[Any]):
    """A pool's idle connections, the one returned last handed out first (LIFO).

    psycopg_pool hands its idle connections out in turn (``popleft`` of those it ``append``
    ed): a pool that grew to a few connections (two threads at start-up, an ack flush beside a
    poll) then sends each statement of a sequential run path to another server backend, whose
    caches the previous statements did not warm: ~9% fewer runs/s through the queue (measured
    with the peers bench's child) than reusing the connection just returned. Its shrinking
    (``popleft`` of an idle one past ``max_idle``) then closes the last returned one: only
    which connection stays open changes."""

    def popleft(self) -> Any:
        return self.pop()


def _hot_first(pool: Any) -> None:
    """Make ``pool`` hand out its most recently returned connection first (:class:`_HotFirst`);
    left as it is when its internals are not the ones this was written for (then merely
    slower, never wrong: ``tests/postgres/test_store.py`` checks the order)."""
    idle = getattr(pool, "_pool", None)
    if type(idle) is deque and not idle:
        pool._pool = _HotFirst()


class _Call:
    """One guarded call: ``severed`` once the watchdog cut its connection."""

    severed = False


def _stale(conn: Any) -> bool:
    """Whether a connection just taken from the pool is unusable, judged without a round trip:
    psycopg knows it closed or broken, or its socket is readable. An idle autocommit connection
    that listens to nothing receives nothing unless the server ended the session (a restart's
    ``57P01`` and end of file, a reset); at worst a stray notice costs one reconnect."""
    if conn.closed or conn.broken:
        return True
    try:
        fd = conn.pgconn.socket
        if hasattr(select, "poll"):  # no descriptor limit (select() fails past 1024)
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(0))  # readable, or hung up / in error
        readable, _, _ = select.select([fd], [], [], 0)
    except Exception:  # no socket any more
        return True
    return bool(readable)


def _rolled_back(sqlstate: str | None) -> bool:
    """Whether an operational error the server itself reported (a SQLSTATE) means the write's
    transaction was rolled back: the server answered with an error, so it did not commit.
    No SQLSTATE (the connection was lost: no answer at all), a connection exception (class
    ``08``) or an operator intervention (``57P0x``: the backend was terminated, perhaps while
    committing) leave the outcome unknown."""
    if not sqlstate:
        return False
    return not (sqlstate.startswith("08") or sqlstate.startswith("57P"))


class _Watchdog:
    """Severs the socket of a connection whose call outlived its deadline.

    psycopg has no client-side statement timeout; a server that stops answering (SIGSTOP, a
    partition) leaves the caller blocked in a read. Shutting the socket down makes that read
    fail at once with an ``OperationalError`` (so a write in flight is reported as
    :class:`CommitOutcomeUnknown`: the server may still apply it when it resumes).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._calls: dict[int, tuple[float, Any, _Call]] = {}
        self._next = 0
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def guard(self, conn: Any, seconds: float) -> Iterator[_Call]:
        import time

        with self._guard:
            token = self._next
            self._next += 1
            call = _Call()
            self._calls[token] = (time.monotonic() + seconds, conn, call)
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(
                    target=self._loop, name="cronwarden-pg-watchdog", daemon=True
                )
                self._thread.start()
        try:
            yield call
        finally:
            with self._guard:
                self._calls.pop(token, None)

    def _loop(self) -> None:
        import time

        while not self._stopping:
            now = time.monotonic()
            with self._guard:
                late = [(c, k) for deadline, c, k in self._calls.values() if deadline <= now]
            for conn, call in late:
                call.severed = True
                log.warning("Postgres did not answer within the deadline: severing the connection")
                _sever(conn)
            self._wake.wait(0.25)

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)


def _sever(conn: Any) -> None:
    """Shut the connection's socket down (both directions) without closing its descriptor:
    the blocked read returns at once and psycopg marks the connection broken."""
    import os
    import socket

    with contextlib.suppress(Exception):
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()
