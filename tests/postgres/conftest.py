"""Fixtures for the Postgres tests: settings in a fresh schema on the session's server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore


@pytest.fixture
def settings(postgres_dsn: str, postgres_schema: str) -> PostgresSettings:
    return PostgresSettings(dsn=postgres_dsn, schema=postgres_schema, expire_every=0)


@pytest.fixture
def make_store(settings: PostgresSettings) -> Iterator[Callable[..., PostgresStore]]:
    """Stores on the test's schema, each with its own pool (as separate hosts would be)."""
    made: list[PostgresStore] = []

    def make(**overrides: Any) -> PostgresStore:
        store = PostgresStore(_with(settings, overrides))
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def make_queue(settings: PostgresSettings) -> Iterator[Callable[..., PostgresQueue]]:
    """Queues on the test's schema, each with its own pool and listener (separate hosts).
    ``ack_flush=`` goes to the queue, every other keyword to its settings."""
    made: list[PostgresQueue] = []

    def make(**overrides: Any) -> PostgresQueue:
        kwargs = {k: overrides.pop(k) for k in ("ack_flush",) if k in overrides}
        queue = PostgresQueue(_with(settings, overrides), **kwargs)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.close()


def _with(settings: PostgresSettings, overrides: dict[str, Any]) -> PostgresSettings:
    import dataclasses

    return dataclasses.replace(settings, **overrides)


def sql(dsn: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement on a fresh connection (the test's own view of the database)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []
