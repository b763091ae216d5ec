"""Live switches onto and off the new stores with ``cronwarden migrate`` (issue #32): local ->
Redis and Redis -> S3 (the object store with SQS), each with both sides firing throughout, a
half-done ledger, a dead letter and a pause, the migration killed once and resumed
(:mod:`.scenario`)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from .harness import SideSpec
from .scenario import switch
from .sides import local_side

pytestmark = [pytest.mark.slow]


def redis_side(url: str, prefix: str) -> SideSpec:
    from cronwarden.adapters.redis import RedisSettings

    env = RedisSettings(url=url, prefix=prefix).to_env()

    def build() -> Any:
        from cronwarden.adapters.redis import RedisProvider

        return RedisProvider.from_env(env)

    return SideSpec("redis", env, build)


def s3_side(moto: Any) -> SideSpec:
    from cronwarden.adapters.objectstore import S3Settings

    settings = S3Settings(bucket=f"cw-{uuid.uuid4().hex[:12]}", aws=moto.settings())
    env = {**moto.env(), **settings.to_env()}

    def build() -> Any:
        from cronwarden.adapters.objectstore import S3Provider

        return S3Provider(settings)

    return SideSpec("s3", env, build)


@pytest.mark.redis
def test_local_to_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str, redis_prefix: str
) -> None:
    source = local_side(tmp_path / "source", "local")
    switch(tmp_path, monkeypatch, source, redis_side(redis_url, redis_prefix))


@pytest.mark.redis
@pytest.mark.aws
def test_redis_to_s3(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    redis_prefix: str,
    moto_server: object,
) -> None:
    switch(tmp_path, monkeypatch, redis_side(redis_url, redis_prefix), s3_side(moto_server))
