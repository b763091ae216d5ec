"""pytest fixtures for a real Redis server and a real Redis Cluster.

Enable with ``pytest_plugins = ["cronwarden.emulators.redis.pytest_plugin"]``.

* ``redis_server`` (session): a private ``redis-server`` on a free loopback port, with its files
  (an append-only file: a restart keeps the data) in a temporary directory, stopped by pid at
  the end. Without ``redis-server`` installed the
  test is skipped on a developer's machine and **fails** where ``$CI`` is set: a CI machine
  without it must not pass by skipping.
* ``redis_url`` (session): its URL.
* ``redis_prefix`` (function): a fresh key prefix, so tests share one server without seeing each
  other's keys (its keys are deleted after the test).
* ``redis_cluster`` (session): a Redis Cluster of three master nodes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from .launcher import RedisCluster, RedisServer, missing_reason


def _require() -> None:
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"Redis tests cannot run: {reason}", pytrace=False)
    pytest.skip(f"Redis tests need a server: {reason}")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    _require()
    server = RedisServer(appendonly=True).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    prefix = f"cwt{uuid.uuid4().hex[:10]}"
    try:
        yield prefix
    finally:
        delete_prefix(redis_url, prefix)


def delete_prefix(url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` (test clean-up; SCAN, not KEYS)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    _require()
    cluster = RedisCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()
