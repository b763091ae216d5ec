"""Each store adapter maps its SDK's failures to the port's three outcomes: CommitConflict,
StoreUnavailable (not applied) and CommitOutcomeUnknown (may have applied)."""

from __future__ import annotations

import sqlite3

import pytest

from cronwarden.model.errors import CommitOutcomeUnknown, StoreUnavailable


def test_sqlite_busy_database_is_unavailable_not_unknown() -> None:
    from cronwarden.adapters.local.store import _unavailable_on_busy

    for text in ("database is locked", "database is busy", "unable to open database file"):
        with pytest.raises(StoreUnavailable) as info, _unavailable_on_busy():
            raise sqlite3.OperationalError(text)
        assert not isinstance(info.value, CommitOutcomeUnknown)
    with pytest.raises(sqlite3.OperationalError, match="no such table"), _unavailable_on_busy():
        raise sqlite3.OperationalError("no such table: records")


def test_firestore_commit_failures_split_by_whether_the_write_was_sent() -> None:
    pytest.importorskip("google.api_core")
    from google.api_core import exceptions as gexc

    from cronwarden.adapters.gcp.store import _commit_failure

    unknown = [
        gexc.DeadlineExceeded("Deadline Exceeded"),
        gexc.InternalServerError("internal"),
        gexc.ServiceUnavailable("Socket closed"),
    ]
    for exc in unknown:
        assert isinstance(_commit_failure(exc), CommitOutcomeUnknown), exc
    not_applied = [
        gexc.ServiceUnavailable("failed to connect to all addresses; Connection refused"),
        gexc.Aborted("too much contention"),
        gexc.ResourceExhausted("quota"),
    ]
    for exc in not_applied:
        mapped = _commit_failure(exc)
        assert isinstance(mapped, StoreUnavailable), exc
        assert not isinstance(mapped, CommitOutcomeUnknown), exc


# -- the full matrix (docs/protocol.md, "Store errors") ------------------------------------------
def _outcome(error: BaseException) -> str:
    from cronwarden.model.errors import CommitConflict

    if isinstance(error, CommitConflict):
        return "conflict"
    if isinstance(error, CommitOutcomeUnknown):
        return "unknown"
    if isinstance(error, StoreUnavailable):
        return "unavailable"
    return type(error).__name__


def test_sqlite_commit_statement_failures() -> None:
    from cronwarden.adapters.local._db import CommitFailed
    from cronwarden.adapters.local.store import _unavailable_on_busy

    cases = {
        CommitFailed("database is locked"): "unavailable",
        CommitFailed("disk I/O error"): "unknown",
        sqlite3.OperationalError("database or disk is full"): "unavailable",
        sqlite3.OperationalError("disk I/O error"): "unavailable",
    }
    for error, expected in cases.items():
        with pytest.raises(StoreUnavailable) as info, _unavailable_on_busy("/x/state.db"):
            raise error
        assert _outcome(info.value) == expected, error
        assert "/x/state.db" in str(info.value) and "\n" not in str(info.value)


def test_table_storage_statuses() -> None:
    pytest.importorskip("azure.data.tables")
    from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

    from cronwarden.adapters.azure.store import TableStore

    store = object.__new__(TableStore)
    store._closed = False

    def status(code: int) -> HttpResponseError:
        error = HttpResponseError(message=f"status {code}")
        error.status_code = code
        return error

    def outcome(error: BaseException, *, write: bool) -> str:
        def fail() -> None:
            raise error

        try:
            store._call(fail, write=write)
        except Exception as exc:
            return _outcome(exc)
        return "none"

    writes = {
        ServiceRequestError("connection refused"): "unavailable",
        ServiceResponseError("connection reset"): "unknown",
        status(503): "unavailable",
        status(429): "unavailable",
        status(500): "unknown",
        status(502): "unknown",
        status(504): "unknown",
        status(408): "unknown",
        status(400): "HttpResponseError",
    }
    for error, expected in writes.items():
        assert outcome(error, write=True) == expected, error
        read = "HttpResponseError" if expected == "HttpResponseError" else "unavailable"
        assert outcome(error, write=False) == read, error


def test_postgres_operational_errors_split_by_whether_the_server_answered() -> None:
    psycopg = pytest.importorskip("psycopg")
    from cronwarden.adapters.postgres.database import Database

    db = object.__new__(Database)
    db._psycopg = psycopg
    db._where = "postgresql://127.0.0.1/x"
    cases = {
        psycopg.OperationalError("server closed the connection unexpectedly"): "unknown",
        psycopg.errors.AdminShutdown("terminating connection"): "unknown",
        psycopg.errors.DiskFull("no space left"): "unavailable",
        psycopg.errors.QueryCanceled("statement timeout"): "unavailable",
        psycopg.errors.LockNotAvailable("lock timeout"): "unavailable",
        psycopg.errors.UniqueViolation("duplicate key"): "conflict",
    }
    for error, expected in cases.items():
        assert _outcome(db._translate(error, what="commit", writes=True)) == expected, error
        read = "conflict" if expected == "conflict" else "unavailable"
        assert _outcome(db._translate(error, what="get", writes=False)) == read, error


def test_firestore_cancelled_and_bad_gateway_are_unknown() -> None:
    pytest.importorskip("google.api_core")
    from google.api_core import exceptions as gexc

    from cronwarden.adapters.gcp.store import _commit_failure, _unavailable

    for exc in (gexc.Cancelled("cancelled"), gexc.BadGateway("502")):
        assert isinstance(exc, _unavailable())
        assert isinstance(_commit_failure(exc), CommitOutcomeUnknown)
