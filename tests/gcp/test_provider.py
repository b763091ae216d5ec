"""GcpProvider configuration, provider selection by name, and import laziness."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from cronwarden.adapters.gcp import FirestoreStore, GcpProvider, PubSubQueue
from cronwarden.emulators.gcp import FirestoreEmulator, PubSubEmulator
from cronwarden.jobs.config import provider_from_env
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import ITEM, RUN, STATUS, Key, Merge

pytestmark = pytest.mark.gcp


def test_from_env_reads_every_setting() -> None:
    env = {
        "GOOGLE_CLOUD_PROJECT": "proj-a",
        "FIRESTORE_EMULATOR_HOST": "127.0.0.1:1",
        "PUBSUB_EMULATOR_HOST": "127.0.0.1:2",
        "CRONWARDEN_GCP_TOPIC": "jobs",
        "CRONWARDEN_GCP_SUBSCRIPTION": "jobs-worker",
        "CRONWARDEN_GCP_MAX_DELIVERIES": "12",
        "CRONWARDEN_GCP_ACK_DEADLINE": "300",
        "CRONWARDEN_FIRESTORE_PREFIX": "x_",
        "CRONWARDEN_FIRESTORE_ITEM_RETENTION": "7d",
    }
    provider = GcpProvider.from_env(env)
    store, queue = provider.store(), provider.queue()
    assert isinstance(store, FirestoreStore) and isinstance(queue, PubSubQueue)
    assert store.project == "proj-a" and store.emulator_host == "127.0.0.1:1"
    assert store.collection_prefix == "x_" and store.retention[ITEM] == timedelta(days=7)
    assert store.retention[RUN] == timedelta(days=90)
    assert queue.topic == "projects/proj-a/topics/jobs"
    assert queue.subscription == "projects/proj-a/subscriptions/jobs-worker"
    assert queue.dead_letter_topic == "projects/proj-a/topics/jobs-dead-letter"
    assert queue.max_deliveries == 12 and queue.ack_deadline == 300
    assert queue.create_missing  # an emulator: resources are created on first use
    assert GcpProvider.from_env({"GOOGLE_CLOUD_PROJECT": "p"}).queue().create_missing is False


def test_explicit_project_beats_the_environment() -> None:
    provider = GcpProvider.from_env({"GOOGLE_CLOUD_PROJECT": "env"}, project="explicit")
    assert provider.project == "explicit"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "project"),
        ({"GCLOUD_PROJECT": "p", "CRONWARDEN_GCP_MAX_DELIVERIES": "3"}, "5 to 100"),
        ({"GCLOUD_PROJECT": "p", "CRONWARDEN_GCP_MAX_DELIVERIES": "lots"}, "integer"),
        ({"GCLOUD_PROJECT": "p", "CRONWARDEN_FIRESTORE_RUN_RETENTION": "forever"}, "duration"),
    ],
)
def test_bad_configuration_is_refused_clearly(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        GcpProvider.from_env(env)


def test_provider_selected_by_name_works_on_the_emulators(
    monkeypatch: pytest.MonkeyPatch,
    firestore_emulator: FirestoreEmulator,
    pubsub_emulator: PubSubEmulator,
) -> None:
    monkeypatch.setenv("CRONWARDEN_GCP_PROJECT", "cw-provider-test")
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.address)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator.address)
    provider = provider_from_env("gcp")
    try:
        assert isinstance(provider, GcpProvider)
        provider.store().commit([Merge(Key(STATUS, "j"), {"ok": True})])
        assert provider.store().get(Key(STATUS, "j")).data == {"ok": True}  # type: ignore[union-attr]
        provider.queue().publish(b"hello")
        (d,) = provider.queue().receive(1, wait=10)
        provider.queue().ack(d)
        assert d.body == b"hello"
    finally:
        provider.close()


def test_imports_load_no_google_sdk_until_an_adapter_connects() -> None:
    code = (
        "import sys, cronwarden, cronwarden.adapters.gcp as g, cronwarden.emulators.gcp;"
        "p = g.GcpProvider('p'); p.store(); p.queue();"
        "loaded = sorted(m for m in sys.modules if m.startswith(('google.cloud.', 'google.pubsub',"
        " 'google.api_core', 'grpc')));"
        "print(loaded); assert not loaded"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


WIF = {
    "CRONWARDEN_GCP_PROJECT": "jobs-project",
    "CRONWARDEN_GCP_WIF_PROVIDER": (
        "projects/123/locations/global/workloadIdentityPools/azure/providers/watcher"
    ),
    "CRONWARDEN_GCP_SERVICE_ACCOUNT": "watcher@jobs-project.iam.gserviceaccount.com",
    "CRONWARDEN_GCP_WIF_AUDIENCE": "api://cronwarden-watcher",
}


def test_workload_identity_federation_from_env_builds_azure_sourced_credentials() -> None:
    env = {**WIF, "IDENTITY_ENDPOINT": "http://127.0.0.1:41000/msi/token", "IDENTITY_HEADER": "h"}
    provider = GcpProvider.from_env(env)
    factory = provider.store()._credentials
    assert callable(factory) and factory is provider.queue()._credentials  # shared, lazy
    creds = factory()
    assert creds is factory()  # built once
    info = creds.info
    assert info["audience"] == "//iam.googleapis.com/" + WIF["CRONWARDEN_GCP_WIF_PROVIDER"]
    assert info["service_account_impersonation_url"].endswith(
        "/serviceAccounts/watcher@jobs-project.iam.gserviceaccount.com:generateAccessToken"
    )
    source = info["credential_source"]
    assert source["url"].startswith("http://127.0.0.1:41000/msi/token?resource=api%3A%2F%2F")
    assert source["headers"] == {"X-IDENTITY-HEADER": "h"}


def test_federation_outside_app_service_uses_instance_metadata() -> None:
    from cronwarden.adapters.gcp._federation import azure_token_source

    source = azure_token_source("api://aud", {"AZURE_CLIENT_ID": "cid"})
    assert source["url"].startswith("http://169.254.169.254/metadata/identity/oauth2/token?")
    assert source["url"].endswith("&client_id=cid") and source["headers"] == {"Metadata": "true"}


def test_partial_federation_settings_are_refused() -> None:
    env = {k: v for k, v in WIF.items() if k != "CRONWARDEN_GCP_WIF_AUDIENCE"}
    with pytest.raises(ConfigurationError, match="CRONWARDEN_GCP_WIF_AUDIENCE"):
        GcpProvider.from_env(env)


def test_no_federation_means_default_credentials() -> None:
    provider = GcpProvider.from_env({"GOOGLE_CLOUD_PROJECT": "p"})
    assert provider.store()._credentials is None and provider.queue()._credentials is None
