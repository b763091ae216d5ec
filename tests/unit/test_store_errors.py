"""Each store adapter maps its SDK's failures to the port's three outcomes: CommitConflict,
StoreUnavailable (not applied) and CommitOutcomeUnknown (may have applied)."""

from __future__ import annotations

import sqlite3

import pytest

from cronwarden.errors import CommitOutcomeUnknown, StoreUnavailable


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
