"""The Postgres provider: store and queue in one PostgreSQL database, shared by any number of
``cronwarden run`` processes on any number of hosts (settings: :mod:`.settings`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Provider

from .database import EXTRA_HINT, Database
from .queue import PostgresQueue
from .settings import PostgresSettings
from .store import PostgresStore


class PostgresProvider(Provider):
    """Store and queue on one connection pool, opened when the store or queue is first asked
    for; the schema is created or migrated on the first operation (see :mod:`.schema`)."""

    name = "postgres"

    def __init__(self, settings: PostgresSettings | None = None, **overrides: Any) -> None:
        missing = [m for m in ("psycopg", "psycopg_pool") if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigurationError(
                f"the Postgres provider needs {' and '.join(missing)} ({EXTRA_HINT})"
            )
        self.settings = settings or PostgresSettings.from_env(**overrides)
        self._db: Database | None = None
        self._store: PostgresStore | None = None
        self._queue: PostgresQueue | None = None

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> PostgresProvider:
        """Settings from the environment; keyword overrides (``dsn`` from ``--dsn``) win."""
        return cls(PostgresSettings.from_env(environ, **overrides))

    @property
    def database(self) -> Database:
        if self._db is None:
            self._db = Database(self.settings, name="cronwarden")
        return self._db

    def store(self) -> PostgresStore:
        if self._store is None:
            self._store = PostgresStore(self.settings, database=self.database)
        return self._store

    def queue(self) -> PostgresQueue:
        if self._queue is None:
            self._queue = PostgresQueue(self.settings, database=self.database)
        return self._queue

    def close(self) -> None:
        for part in (self._store, self._queue):
            if part is not None:
                part.close()
        if self._db is not None:
            self._db.close()
        self._db = self._store = self._queue = None

    def __repr__(self) -> str:
        return f"PostgresProvider({self.settings.display_dsn}, schema={self.settings.schema!r})"
