"""The Redis provider: store and queue on one Redis (settings: :mod:`.settings`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Provider

from ._link import EXTRA_HINT, Link
from .queue import RedisQueue
from .settings import RedisSettings
from .store import RedisStore


class RedisProvider(Provider):
    """Store and queue on one connection pool, opened on the first request: building the
    provider never connects."""

    name = "redis"

    def __init__(self, settings: RedisSettings | None = None, **overrides: Any) -> None:
        if importlib.util.find_spec("redis") is None:
            raise ConfigurationError(f"the Redis provider needs redis-py ({EXTRA_HINT})")
        self.settings = settings or RedisSettings.from_env(**overrides)
        self._link: Link | None = None
        self._store: RedisStore | None = None
        self._queue: RedisQueue | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> RedisProvider:
        """Settings from the environment; non-``None`` keyword overrides win."""
        return cls(RedisSettings.from_env(environ, **overrides))

    @property
    def link(self) -> Link:
        if self._link is None:
            self._link = Link(self.settings, name="cronwarden")
        return self._link

    def store(self) -> RedisStore:
        if self._store is None:
            self._store = RedisStore(self.settings, link=self.link)
        return self._store

    def queue(self) -> RedisQueue:
        if self._queue is None:
            self._queue = RedisQueue(self.settings, link=Link(self.settings, name="cronwarden"))
        return self._queue

    def close(self) -> None:
        for part in (self._store, self._queue):
            if part is not None:
                part.close()
        if self._queue is not None:
            self._queue.link.close()
        if self._link is not None:
            self._link.close()
        self._link = self._store = self._queue = None

    def __repr__(self) -> str:
        return f"RedisProvider({self.settings.display_url}, prefix={self.settings.prefix!r})"
