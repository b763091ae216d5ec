"""The Redis provider: store and queue on one Redis (settings: :mod:`.settings`)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import Any

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Provider

from ._link import EXTRA_HINT, Link
from .queue import RedisQueue
from .settings import RedisSettings
from .store import RedisStore

log = logging.getLogger("cronwarden.redis")
#: the only policy under which Redis never deletes a key to make room
SAFE_POLICY = "noeviction"


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
            self.eviction_policy()
        return self._store

    def eviction_policy(self) -> str | None:
        """The server's ``maxmemory-policy``, read once when the store is first asked for, with
        a warning unless it is ``noeviction``: under any other policy a full Redis deletes keys
        to make room (``volatile-*``: keys with a TTL, which cronwarden's records have), and a
        deleted claim is a window that can run twice. ``None`` when it cannot be read (a
        managed service that disables ``CONFIG``, or Redis unreachable: the first operation
        says so). Setup, not protocol: not a counted round trip."""
        try:
            (reply,) = self.link.call(
                None, [["CONFIG", "GET", "maxmemory-policy"]], what="read maxmemory-policy"
            )
        except Exception:  # unreachable: the store's first real operation reports it
            return None
        if not isinstance(reply, list) or len(reply) < 2:
            return None
        policy = bytes(reply[1]).decode(errors="replace")
        if policy != SAFE_POLICY:
            log.warning(
                "Redis %s has maxmemory-policy %s: when full it may evict cronwarden's records "
                "(a lost claim lets a window run twice); set maxmemory-policy %s",
                self.settings.display_url,
                policy,
                SAFE_POLICY,
                extra={"event": "store.misconfigured"},
            )
        return policy

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
