"""The ``s3`` provider (object store on S3 + the aws provider's SQS queue) on moto: its
settings, ``cronwarden doctor`` and ``cronwarden status``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from click.testing import CliRunner

from cronwarden import JobSet
from cronwarden.adapters.objectstore import S3Provider, S3Settings
from cronwarden.adapters.objectstore.settings import ENV_S3_BUCKET, ENV_S3_PREFIX
from cronwarden.jobs import loading
from cronwarden.ops.doctor import Doctor, failed
from cronwarden.testing import run_once
from tests.objstore import jobs as s3_jobs

pytestmark = pytest.mark.aws


def _settings(moto: Any) -> S3Settings:
    return S3Settings(bucket=f"cw-{uuid.uuid4().hex[:12]}", prefix="prod/", aws=moto.settings())


def test_settings_round_trip_through_the_environment(moto_server: Any) -> None:
    settings = _settings(moto_server)
    env = settings.to_env()
    assert env[ENV_S3_BUCKET] == settings.bucket and env[ENV_S3_PREFIX] == "prod/"
    assert S3Settings.from_env(env) == settings
    assert S3Settings.from_env({}).bucket == "cronwarden"


def test_doctor_checks_store_and_queue(moto_server: Any) -> None:
    provider = S3Provider(_settings(moto_server))
    try:
        checks = Doctor(JobSet([s3_jobs.nightly]), provider, worker_wait=0.0).run()
        by_name = {c.name: c for c in checks}
        assert by_name["store"].ok, by_name["store"].line()
        assert by_name["queue"].ok, by_name["queue"].line()
        assert {c.name for c in failed(checks)} == {"watcher"}  # no watcher ran here
    finally:
        provider.close()


def test_status_shows_a_run_on_s3(moto_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from cronwarden.cli import cli

    settings = _settings(moto_server)
    provider = S3Provider(settings)
    try:
        outcome = run_once(s3_jobs.nightly, "2026-01-20T02:00Z", store=provider.store())
        assert outcome.kind.value == "succeeded", outcome
    finally:
        provider.close()
    assert loading.PROVIDERS["s3"] == "cronwarden.adapters.objectstore:S3Provider"
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(
        cli, ["status", "--jobs", "tests.objstore.jobs", "--provider", "s3", "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    (row,) = [r for r in rows if r.get("job") == "s3-nightly"]
    assert row["last_success_window"].startswith("2026-01-20T02:00"), row
