"""The ``blob`` provider (Azure Blob store on Azurite + Service Bus on the cronwarden emulator)
and the ``gcs`` provider (GCS store on fake-gcs-server + Pub/Sub on its emulator): their
settings, ``cronwarden doctor`` and ``cronwarden status``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from cronwarden import JobSet
from cronwarden.adapters.objectstore import BlobProvider, GcsProvider
from cronwarden.jobs import loading
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Provider
from cronwarden.ops.doctor import Doctor, failed
from cronwarden.testing import run_once
from tests.backends import blob_azurite, fake_gcs
from tests.objstore import jobs as s3_jobs


def _blob_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    azurite = blob_azurite(request)
    bus: Any = request.getfixturevalue("servicebus_emulator")
    queue = bus.create_queue(max_delivery_count=10, lock_duration=2.0)
    try:
        yield {
            "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string,
            "CRONWARDEN_SERVICEBUS_CONNECTION": bus.connection_string,
            "CRONWARDEN_SERVICEBUS_QUEUE": queue,
            "CRONWARDEN_SERVICEBUS_MAX_DELIVERIES": "10",
            "CRONWARDEN_BLOB_CONTAINER": f"cw-{uuid.uuid4().hex[:12]}",
            "CRONWARDEN_BLOB_PREFIX": "prod/",
            "CRONWARDEN_BLOB_CREATE_MISSING": "1",
        }
    finally:
        bus.delete_queue(queue)


def _gcs_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    server = fake_gcs(request)
    pubsub: Any = request.getfixturevalue("pubsub_emulator")
    yield {
        "CRONWARDEN_GCP_PROJECT": f"cw-gcs-{uuid.uuid4().hex[:8]}",
        "PUBSUB_EMULATOR_HOST": pubsub.address,
        "STORAGE_EMULATOR_HOST": server.endpoint,
        "CRONWARDEN_GCP_CREATE_MISSING": "1",
        "CRONWARDEN_GCS_BUCKET": f"cw-{uuid.uuid4().hex[:12]}",
        "CRONWARDEN_GCS_PREFIX": "prod/",
    }


@pytest.fixture(
    params=[
        pytest.param("blob", marks=pytest.mark.azure),
        pytest.param("gcs", marks=pytest.mark.gcp),
    ]
)
def cloud_env(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    """(provider name, the environment that configures it on fresh emulator resources)."""
    make = _blob_env if request.param == "blob" else _gcs_env
    for env in make(request):
        yield request.param, env


def _provider(name: str, env: dict[str, str]) -> Provider:
    cls = BlobProvider if name == "blob" else GcsProvider
    return cls.from_env(env)


def test_registered_with_their_extras() -> None:
    assert loading.PROVIDERS["blob"] == "cronwarden.adapters.objectstore:BlobProvider"
    assert loading.PROVIDERS["gcs"] == "cronwarden.adapters.objectstore:GcsProvider"


def test_blob_needs_a_connection_string() -> None:
    with pytest.raises(ConfigurationError, match="CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING"):
        BlobProvider.from_env({})


def test_gcs_needs_a_project() -> None:
    with pytest.raises(ConfigurationError, match="project"):
        GcsProvider.from_env({})


def test_doctor_checks_store_and_queue(cloud_env: tuple[str, dict[str, str]]) -> None:
    name, env = cloud_env
    provider = _provider(name, env)
    try:
        checks = Doctor(JobSet([s3_jobs.nightly]), provider, worker_wait=0.0).run()
        by_name = {c.name: c for c in checks}
        assert by_name["store"].ok, by_name["store"].line()
        assert by_name["queue"].ok, by_name["queue"].line()
        assert {c.name for c in failed(checks)} == {"watcher"}, [c.line() for c in failed(checks)]
    finally:
        provider.close()


def test_status_shows_a_run(
    cloud_env: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cronwarden.cli import cli

    name, env = cloud_env
    provider = _provider(name, env)
    try:
        outcome = run_once(s3_jobs.nightly, "2026-01-20T02:00Z", store=provider.store())
        assert outcome.kind.value == "succeeded", outcome
    finally:
        provider.close()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = CliRunner().invoke(
        cli, ["status", "--jobs", "tests.objstore.jobs", "--provider", name, "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    (row,) = [r for r in rows if r.get("job") == "s3-nightly"]
    assert row["last_success_window"].startswith("2026-01-20T02:00"), row
    # the status header names where the state is, never the connection string
    assert "AccountKey" not in result.output
