"""pytest fixtures for a real PostgreSQL server.

Enable with ``pytest_plugins = ["cronwarden.emulators.postgres.pytest_plugin"]``.

* ``postgres_server`` (session): a private server started from the installed binaries (stopped
  by pid at the end), or the server ``$CRONWARDEN_TEST_POSTGRES_DSN`` names. Where neither is
  available the test **fails** with a line saying how to install the binaries: a CI machine
  without them must not pass by skipping.
* ``postgres_dsn`` (session): its DSN.
* ``postgres_schema`` (function): a fresh schema name, dropped after the test, so tests share one
  server without seeing each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from .launcher import PostgresServer, missing_reason

DSN_ENV = "CRONWARDEN_TEST_POSTGRES_DSN"


@dataclass
class ExternalServer:
    """A server the user runs (``$CRONWARDEN_TEST_POSTGRES_DSN``); never started or stopped."""

    dsn: str


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer | ExternalServer]:
    external = os.environ.get(DSN_ENV, "").strip()
    if external:
        yield ExternalServer(external)
        return
    reason = missing_reason()
    if reason is not None:
        pytest.fail(f"PostgreSQL tests cannot run: {reason} (or set ${DSN_ENV})", pytrace=False)
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer | ExternalServer) -> str:
    return postgres_server.dsn


@pytest.fixture
def postgres_schema(postgres_dsn: str) -> Iterator[str]:
    name = f"cw_t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        drop_schema(postgres_dsn, name)


def drop_schema(dsn: str, name: str) -> None:
    """Drop ``name`` and everything in it (test clean-up)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
