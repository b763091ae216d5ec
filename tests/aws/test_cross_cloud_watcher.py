"""The watcher on AWS of jobs running on GCP or Azure (``deploy render --provider gcp|azure
--watcher-provider aws``): the rendered Lambda ``handler.watcher`` builds the jobs' cloud's store
and dead-letter queue from its environment and reports a missed window and the remote DLQ depth.

On the real emulators: the Firestore and Pub/Sub emulators (GCP jobs), Azurite and the Service Bus
emulator (Azure jobs), moto for the AWS side (Secrets Manager holding the Azure credential, read
by reference at cold start). The GCP federation from the Lambda role is checked offline: google-auth
signs the GetCallerIdentity request from the Lambda environment's credentials.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock
from urllib.parse import unquote

import pytest

from cronwarden import RunRequest
from cronwarden.model.ports import Queue, Store
from cronwarden.run.engine import Engine
from tests.support.procs import poll

JOBS = Path(__file__).with_name("cross_cloud_jobs.py")
JOB = "cc-hourly"


def _rendered_handler(tmp_path: Path, cloud: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``watcher/function/handler.py`` of ``deploy render --provider <cloud> --watcher-provider
    aws``, imported as Lambda would (the package folder on the path)."""
    from cronwarden.deploy.render import render

    out = render(cloud, str(JOBS), tmp_path / "deploy", watcher_provider="aws").out
    package = out / "watcher" / "function"
    requirements = (package / "requirements.txt").read_text()
    assert "cronwarden[aws]==" in requirements
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.delitem(sys.modules, "cross_cloud_jobs", raising=False)
    spec = importlib.util.spec_from_file_location(f"handler_{cloud}", package / "handler.py")
    assert spec is not None and spec.loader is not None
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    return handler


@contextmanager
def lambda_env(values: dict[str, str], *, absent: tuple[str, ...] = ()) -> Iterator[None]:
    """The function's environment for the test's duration (restored after, whatever the
    handler wrote into it)."""
    with mock.patch.dict(os.environ, values):
        for name in absent:
            os.environ.pop(name, None)
        yield


def _seed_missed_window(handler: ModuleType, store: Store) -> None:
    """One success three hours ago and nothing since, as the jobs' cloud's worker writes it:
    the windows after it are missed."""
    from cronwarden.adapters.aws.functions import runtime_of

    jobs = runtime_of(handler.watcher).jobs
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    outcome = Engine(jobs, store).execute(RunRequest(JOB, hour - timedelta(hours=3)))
    assert outcome.kind.value == "succeeded", outcome


def _dead_letter_one(queue: Queue) -> None:
    queue.publish(b'{"poisoned": true}', attributes={"job": JOB})
    deliveries = poll(lambda: queue.receive(max_messages=1, wait=1.0), what="a delivery")
    queue.dead_letter(deliveries[0], "TestPoison", "dead-lettered by the test")
    poll(lambda: queue.dlq_depth() == 1, what="one dead letter")


def _assert_reports_missed(report: dict[str, Any]) -> None:
    assert report["ok"] is False
    missed = [a for a in report["active"] if a["job"] == JOB and a["alert"] == "missed"]
    assert missed and "no success for the" in missed[0]["text"], report["active"]
    assert report["dlq_depth"] == 1


@pytest.mark.gcp
@pytest.mark.aws
def test_the_aws_watcher_reports_a_missed_window_of_jobs_on_gcp(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    moto_server: Any,
    firestore_emulator: Any,
    pubsub_emulator: Any,
) -> None:
    from cronwarden.adapters.gcp import GcpProvider

    handler = _rendered_handler(tmp_path, "gcp", monkeypatch)
    project = f"cw-ccw-{uuid.uuid4().hex[:8]}"
    env = {
        **moto_server.env(),  # the Lambda side: region and role credentials
        "CRONWARDEN_PROVIDER": "gcp",
        "CRONWARDEN_GCP_PROJECT": project,
        "FIRESTORE_EMULATOR_HOST": firestore_emulator.address,
        "PUBSUB_EMULATOR_HOST": pubsub_emulator.address,
    }
    with lambda_env(env, absent=("CRONWARDEN_AWS_SECRET_ENVIRONMENT",)):
        jobs_side = GcpProvider.from_env(create_missing=True)  # what runs the jobs on GCP
        try:
            _seed_missed_window(handler, jobs_side.store())
            _dead_letter_one(jobs_side.queue())
            with caplog.at_level(logging.INFO):
                report = handler.watcher({"source": "cronwarden.watcher"}, None)
        finally:
            jobs_side.close()
    _assert_reports_missed(report)
    assert any(getattr(r, "event", "") == "alert.fired" for r in caplog.records)


@pytest.mark.azure
@pytest.mark.aws
def test_the_aws_watcher_reads_azure_credentials_by_reference_and_reports_a_missed_window(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    moto_server: Any,
    azurite: Any,
    servicebus_emulator: Any,
) -> None:
    from cronwarden.adapters.aws.secrets import SECRET_ENVIRONMENT_ENV
    from cronwarden.adapters.azure import AzureProvider
    from cronwarden.adapters.azure.settings import (
        SERVICEBUS_CONNECTION_ENV,
        STORAGE_CONNECTION_ENV,
        STORAGE_CONNECTION_FALLBACK_ENV,
    )

    handler = _rendered_handler(tmp_path, "azure", monkeypatch)
    table, queue = azurite.new_table(), servicebus_emulator.create_queue(max_delivery_count=3)
    secrets = moto_server.client("secretsmanager")
    credentials = {
        STORAGE_CONNECTION_ENV: azurite.connection_string,
        SERVICEBUS_CONNECTION_ENV: servicebus_emulator.connection_string,
    }
    arns = {
        name: secrets.create_secret(Name=f"cw/{name}-{uuid.uuid4().hex[:6]}", SecretString=value)[
            "ARN"
        ]
        for name, value in credentials.items()
    }
    env = {
        **moto_server.env(),
        "CRONWARDEN_PROVIDER": "azure",
        "CRONWARDEN_AZURE_TABLE": table,
        "CRONWARDEN_SERVICEBUS_QUEUE": queue,
        SECRET_ENVIRONMENT_ENV: json.dumps(arns),  # references only, as rendered
    }
    absent = (*credentials, STORAGE_CONNECTION_FALLBACK_ENV)
    jobs_side = AzureProvider(
        connection_string=azurite.connection_string,
        table=table,
        servicebus_connection=servicebus_emulator.connection_string,
        queue_name=queue,
        max_deliveries=3,
    )
    try:
        _seed_missed_window(handler, jobs_side.store())
        _dead_letter_one(jobs_side.queue())
        with lambda_env(env, absent=absent), caplog.at_level(logging.INFO):
            assert not any(name in os.environ for name in credentials)  # only by reference
            report = handler.watcher({"source": "cronwarden.watcher"}, None)
            assert all(os.environ[name] == value for name, value in credentials.items())
    finally:
        jobs_side.close()
        azurite.drop_table(table)
        servicebus_emulator.delete_queue(queue)
    _assert_reports_missed(report)
    assert any(getattr(r, "event", "") == "alert.fired" for r in caplog.records)
    told = json.dumps(report) + caplog.text
    assert "secrets.loaded" in {getattr(r, "event", "") for r in caplog.records}
    for value in credentials.values():  # the secrets are never logged nor reported
        assert value not in told and "SharedAccessKey=" not in told


@pytest.mark.aws
def test_an_unreadable_secret_fails_the_watcher_loudly_naming_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: Any
) -> None:
    from cronwarden.adapters.aws.secrets import SECRET_ENVIRONMENT_ENV
    from cronwarden.model.errors import ConfigurationError

    handler = _rendered_handler(tmp_path, "azure", monkeypatch)
    missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:cw/absent-AbCdEf"
    env = {
        **moto_server.env(),
        "CRONWARDEN_PROVIDER": "azure",
        SECRET_ENVIRONMENT_ENV: json.dumps({"AZURE_CLIENT_SECRET": missing}),
    }
    with lambda_env(env, absent=("AZURE_CLIENT_SECRET",)):
        with pytest.raises(ConfigurationError, match="cannot read AZURE_CLIENT_SECRET") as info:
            handler.watcher({}, None)
        assert missing in str(info.value)
        assert "AZURE_CLIENT_SECRET" not in os.environ
        # not cached as done: the next invocation tries again (and fails again, loudly)
        with pytest.raises(ConfigurationError):
            handler.watcher({}, None)


def test_the_gcp_reader_on_lambda_federates_from_the_role_in_its_environment() -> None:
    """``CRONWARDEN_GCP_WIF_SOURCE=aws``: google-auth's AWS credentials sign GetCallerIdentity
    with the Lambda environment's role credentials and region (no metadata server, no key)."""
    from google.auth import aws

    from cronwarden.adapters.gcp import GcpProvider

    provider_name = "projects/123/locations/global/workloadIdentityPools/cw-ext/providers/aws"
    env = {
        "CRONWARDEN_GCP_PROJECT": "p",
        "CRONWARDEN_GCP_WIF_PROVIDER": provider_name,
        "CRONWARDEN_GCP_SERVICE_ACCOUNT": "cw-ext@p.iam.gserviceaccount.com",
        "CRONWARDEN_GCP_WIF_SOURCE": "aws",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "ASIAEXAMPLEROLEKEY",
        "AWS_SECRET_ACCESS_KEY": "role-secret",
        "AWS_SESSION_TOKEN": "role-session-token",
    }
    with lambda_env(env, absent=("AWS_DEFAULT_REGION",)):
        provider = GcpProvider.from_env(env)
        factory = provider._store_options["credentials"]
        credentials = factory()
        assert isinstance(credentials, aws.Credentials)
        assert credentials.service_account_email == "cw-ext@p.iam.gserviceaccount.com"
        token = json.loads(unquote(credentials.retrieve_subject_token(None)))
    assert token["url"] == (
        "https://sts.eu-west-1.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"
    )
    headers = {h["key"].lower(): h["value"] for h in token["headers"]}
    assert headers["x-amz-security-token"] == "role-session-token"
    assert "Credential=ASIAEXAMPLEROLEKEY/" in headers["authorization"]
    assert headers["x-goog-cloud-target-resource"] == f"//iam.googleapis.com/{provider_name}"
    assert "role-secret" not in json.dumps(token)


def test_federation_from_aws_needs_no_audience_but_the_provider_and_account() -> None:
    from cronwarden.adapters.gcp.settings import GcpSettings
    from cronwarden.model.errors import ConfigurationError

    base = {"CRONWARDEN_GCP_WIF_SOURCE": "aws"}
    with pytest.raises(ConfigurationError, match="CRONWARDEN_GCP_SERVICE_ACCOUNT"):
        GcpSettings.from_env({**base, "CRONWARDEN_GCP_WIF_PROVIDER": "projects/1/x"})
    with pytest.raises(ConfigurationError, match="CRONWARDEN_GCP_WIF_SOURCE"):
        GcpSettings.from_env({"CRONWARDEN_GCP_WIF_SOURCE": "oracle"})
    settings = GcpSettings.from_env(
        {**base, "CRONWARDEN_GCP_WIF_PROVIDER": "p", "CRONWARDEN_GCP_SERVICE_ACCOUNT": "sa"}
    )
    assert settings.federated and settings.wif_source == "aws"
    assert GcpSettings.from_env(settings.to_env()) == settings
