"""The local provider: a store and a queue in SQLite files under one directory."""

from __future__ import annotations

from cronwarden.model.ports import Provider

from .queue import SQLiteQueue
from .settings import DEFAULT_MAX_DELIVERIES, DEFAULT_PATH, LocalSettings  # noqa: F401 - old home
from .store import SQLiteStore


class LocalProvider(Provider):
    """State and queue in SQLite (``path``; the queue uses ``<path>-queue``).

    Safe for several worker processes on one machine sharing the same files.
    """

    name = "local"

    def __init__(
        self, path: str | None = None, *, max_deliveries: int = DEFAULT_MAX_DELIVERIES
    ) -> None:
        self.path = path or LocalSettings.from_env().path
        self._max_deliveries = max_deliveries
        self._store: SQLiteStore | None = None
        self._queue: SQLiteQueue | None = None

    def store(self) -> SQLiteStore:
        if self._store is None:
            self._store = SQLiteStore(self.path)
        return self._store

    def queue(self) -> SQLiteQueue:
        if self._queue is None:
            self._queue = SQLiteQueue(self.path + "-queue", max_deliveries=self._max_deliveries)
        return self._queue

    def close(self) -> None:
        for part in (self._store, self._queue):
            if part is not None:
                part.close()
        self._store = self._queue = None
