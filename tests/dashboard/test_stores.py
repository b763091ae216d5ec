"""The dashboard on the Redis, S3, Blob and GCS providers (issue #32): the provider chosen by
name as ``cronwarden dashboard --provider NAME`` chooses it, seeded like the SQLite tests, and
read and acted on through the app: the overview, a job's timeline and a run, the dead letters,
and the window and pause actions."""

from __future__ import annotations

import json
import urllib.request
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from cronwarden.dashboard import create_app
from cronwarden.jobs.loading import provider_from_env
from cronwarden.jobs.pause import pause_of
from cronwarden.model.ports import Provider
from cronwarden.model.records import RunRecord, run_key_of, status_key_of

from . import seed
from .conftest import HOSTS, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
DEAD = {"job": "dead", "window": "2026-01-20T12:00Z", "reason": "row fixed by hand"}


def _env(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "blob":
        from tests.backends import blob_azurite

        bus: Any = request.getfixturevalue("servicebus_emulator")
        queue = bus.create_queue(max_delivery_count=10)
        request.addfinalizer(lambda: bus.delete_queue(queue))
        return {
            "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING": blob_azurite(request).connection_string,
            "CRONWARDEN_BLOB_CONTAINER": f"cw-{uuid.uuid4().hex[:12]}",
            "CRONWARDEN_BLOB_CREATE_MISSING": "1",
            "CRONWARDEN_SERVICEBUS_CONNECTION": bus.connection_string,
            "CRONWARDEN_SERVICEBUS_QUEUE": queue,
        }
    if request.param == "gcs":
        from tests.backends import fake_gcs

        pubsub: Any = request.getfixturevalue("pubsub_emulator")
        return {
            "CRONWARDEN_GCP_PROJECT": f"cw-dash-{uuid.uuid4().hex[:8]}",
            "PUBSUB_EMULATOR_HOST": pubsub.address,
            "STORAGE_EMULATOR_HOST": fake_gcs(request).endpoint,
            "CRONWARDEN_GCP_CREATE_MISSING": "1",
            "CRONWARDEN_GCS_BUCKET": f"cw-{uuid.uuid4().hex[:12]}",
        }
    if request.param == "redis":
        from cronwarden.adapters.redis import RedisSettings

        url = request.getfixturevalue("redis_url")
        prefix = request.getfixturevalue("redis_prefix")
        return RedisSettings(url=url, prefix=prefix).to_env()
    from cronwarden.adapters.objectstore import S3Settings

    moto: Any = request.getfixturevalue("moto_server")
    return S3Settings(bucket=f"cw-{uuid.uuid4().hex[:12]}", aws=moto.settings()).to_env()


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("s3", marks=pytest.mark.aws),
        pytest.param("blob", marks=pytest.mark.azure),
        pytest.param("gcs", marks=pytest.mark.gcp),
    ]
)
def store_provider(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Provider]:
    """The provider named by the parameter, built from the environment, seeded."""
    for name, value in _env(request).items():
        monkeypatch.setenv(name, value)
    provider = provider_from_env(request.param)
    try:
        seed.seed(provider.store(), provider.queue())
        yield provider
    finally:
        provider.close()


@pytest.fixture
def client(store_provider: Provider) -> TestClient:
    app = create_app(
        seed.jobs(),
        store_provider.store(),
        store_provider.queue(),
        actions_token=TOKEN,
        clock=lambda: seed.NOW,
        allowed_hosts=HOSTS,
    )
    return TestClient(app)


def _run(provider: Provider, job: str, window: str) -> RunRecord:
    record = provider.store().get(run_key_of(job, window))
    assert record is not None
    return RunRecord.from_data(record.data)


def test_overview_shows_every_job_in_its_state(client: TestClient) -> None:
    data = client.get("/api/overview").json()
    states = {j["name"]: j["state"] for j in data["jobs"]}
    assert states == {
        "healthy": "alerting",
        "failing": "alerting",
        "dead": "alerting",
        "running": "running",
        "paused": "paused",
        "suspicious": "alerting",
        "never": "pending",
    }
    assert data["dlq_depth"] == 1
    rows = {j["name"]: j for j in data["jobs"]}
    assert rows["dead"]["dead_letters"] == 1
    page = client.get("/")
    assert page.status_code == 200 and "suspicious" in page.text


def test_a_jobs_timeline_and_run(client: TestClient) -> None:
    data = client.get("/api/jobs/healthy/timeline?start=2026-01-19T12:00Z&end=2026-01-20T12:30Z")
    windows = {w["window"]: w["state"] for w in data.json()["windows"]}
    assert len(windows) == 25 and windows["2026-01-19T17:00Z"] == "gap"
    assert windows["2026-01-20T12:00Z"] == "succeeded"
    run = client.get("/api/jobs/running/runs/2026-01-20T12:00Z").json()
    assert run["state"] == "running" and run["ledger"]["items"] == 4
    assert run["ledger"]["done"] == 2 and run["ledger"]["uncertain"] == 1
    assert client.get("/jobs/healthy").status_code == 200


def test_dead_letters_are_listed_redacted_and_redriven(
    client: TestClient, store_provider: Provider
) -> None:
    letters = client.get("/api/dead-letters").json()
    assert letters["dlq_depth"] == 1
    page = client.get("/dead-letters")
    assert page.status_code == 200 and "dead" in page.text
    assert seed.SECRET not in page.text and seed.SECRET not in str(letters)
    response = client.post("/api/actions/redrive", json={"limit": 1}, headers=AUTH)
    assert response.json() == {"redriven": 1}
    assert store_provider.queue().dlq_depth() == 0


def test_resolve_and_pause_act_on_the_store(client: TestClient, store_provider: Provider) -> None:
    response = client.post("/api/actions/resolve", json=DEAD, headers=AUTH)
    assert response.status_code == 200, response.text
    run = _run(store_provider, "dead", "2026-01-20T12:00Z")
    assert run.state.value == "excused" and run.excused == "resolved"
    again = client.post("/api/actions/resolve", json=DEAD, headers=AUTH)
    assert again.status_code == 400 and "nothing to resolve" in again.json()["error"]
    paused = client.post(
        "/api/actions/pause", json={"job": "healthy", "reason": "upstream outage"}, headers=AUTH
    )
    assert paused.status_code == 200, paused.text
    status = store_provider.store().get(status_key_of("healthy"))
    assert status is not None
    view = pause_of(status.data)
    assert view is not None and view.reason == "upstream outage"
    resumed = client.post("/api/actions/resume", json={"job": "healthy"}, headers=AUTH)
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    status = store_provider.store().get(status_key_of("healthy"))
    assert status is not None and pause_of(status.data) is None


@pytest.mark.redis
def test_the_command_serves_redis_state(tmp_path: Path, redis_url: str, redis_prefix: str) -> None:
    """``cronwarden dashboard --provider redis`` (a process on a free loopback port) shows a
    run written to Redis."""
    from cronwarden.adapters.redis import RedisProvider, RedisSettings
    from cronwarden.jobs.config import load_jobs
    from cronwarden.testing import run_once

    from .test_cli import JOBS, _env, _serve, _stop

    (tmp_path / "jobs.py").write_text(JOBS)
    settings = RedisSettings(url=redis_url, prefix=redis_prefix)
    provider = RedisProvider(settings)
    try:
        nightly = load_jobs(str(tmp_path / "jobs.py")).get("nightly")
        assert nightly is not None
        outcome = run_once(nightly, "2026-01-20T02:00Z", store=provider.store())
        assert outcome.kind.value == "succeeded", outcome
    finally:
        provider.close()
    process, port = _serve(tmp_path, "--provider", "redis", env=_env(tmp_path, **settings.to_env()))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/overview", timeout=5) as answer:
            data = json.loads(answer.read())
        (row,) = data["jobs"]
        assert row["name"] == "nightly" and row["last_success_window"]["utc"].startswith(
            "2026-01-20T02:00"
        ), row
    finally:
        _stop(process)
