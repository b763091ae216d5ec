"""The Redis provider: a store and a queue (Redis Streams) on one Redis server, a
Sentinel-managed or managed Redis, or a Redis Cluster (redis-py). ``pip install
'cronwarden[redis]'``; select with ``--provider redis`` and a URL in ``$CRONWARDEN_REDIS_URL``.

Importing this package imports no driver: redis-py loads when the first connection is opened.
"""

from __future__ import annotations

from .provider import RedisProvider
from .queue import RedisQueue
from .settings import RedisSettings
from .store import RedisStore

__all__ = ["RedisProvider", "RedisQueue", "RedisSettings", "RedisStore"]
