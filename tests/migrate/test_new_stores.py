"""Live switches onto and off the new stores with ``cronwarden migrate`` (issue #32): local ->
Redis, Redis -> S3 (the object store with SQS) and Blob (with Service Bus) -> GCS (with
Pub/Sub), each with both sides firing throughout, a half-done ledger, a dead letter and a pause,
the migration killed once and resumed (:mod:`.scenario`)."""

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


def blob_side(request: pytest.FixtureRequest) -> SideSpec:
    from tests.backends import blob_azurite

    azurite = blob_azurite(request)
    servicebus: Any = request.getfixturevalue("servicebus_emulator")
    queue = servicebus.create_queue(
        max_delivery_count=10, lock_duration=5.0, requires_duplicate_detection=True
    )
    env = {
        "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string,
        "CRONWARDEN_BLOB_CONTAINER": f"cw-{uuid.uuid4().hex[:12]}",
        "CRONWARDEN_BLOB_CREATE_MISSING": "1",
        "CRONWARDEN_SERVICEBUS_CONNECTION": servicebus.connection_string,
        "CRONWARDEN_SERVICEBUS_QUEUE": queue,
    }

    def build() -> Any:
        from cronwarden.adapters.objectstore import BlobProvider

        return BlobProvider.from_env(env)

    return SideSpec("blob", env, build)


def gcs_side(request: pytest.FixtureRequest) -> SideSpec:
    from tests.backends import fake_gcs

    server = fake_gcs(request)
    pubsub: Any = request.getfixturevalue("pubsub_emulator")
    env = {
        "CRONWARDEN_GCP_PROJECT": f"cw-migrate-{uuid.uuid4().hex[:8]}",
        "PUBSUB_EMULATOR_HOST": pubsub.address,
        "STORAGE_EMULATOR_HOST": server.endpoint,
        "CRONWARDEN_GCP_CREATE_MISSING": "1",
        "CRONWARDEN_GCS_BUCKET": f"cw-{uuid.uuid4().hex[:12]}",
    }

    def build() -> Any:
        from cronwarden.adapters.objectstore import GcsProvider

        return GcsProvider.from_env(env)

    return SideSpec("gcs", env, build)


@pytest.mark.azure
@pytest.mark.gcp
def test_blob_to_gcs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    switch(tmp_path, monkeypatch, blob_side(request), gcs_side(request))
