"""Fixtures for the Redis tests: settings under a fresh key prefix on the session's server."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronwarden.adapters.redis import RedisQueue, RedisSettings, RedisStore


@pytest.fixture
def settings(redis_url: str, redis_prefix: str) -> RedisSettings:
    return RedisSettings(url=redis_url, prefix=redis_prefix)


@pytest.fixture
def make_store(settings: RedisSettings) -> Iterator[Callable[..., RedisStore]]:
    """Stores on the test's prefix, each with its own connections (as separate hosts)."""
    made: list[RedisStore] = []

    def make(**overrides: Any) -> RedisStore:
        store = RedisStore(dataclasses.replace(settings, **overrides))
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def make_queue(settings: RedisSettings) -> Iterator[Callable[..., RedisQueue]]:
    made: list[RedisQueue] = []

    def make(**overrides: Any) -> RedisQueue:
        queue = RedisQueue(dataclasses.replace(settings, **overrides))
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.close()


@pytest.fixture
def admin(redis_url: str) -> Iterator[Any]:
    """A plain redis-py client: the test's own view of the server."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        client.close()
