"""One settings object per cloud: every environment name read and written in one place."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta

import pytest

from cronwarden.adapters.azure.settings import AzureSettings, schedule_setting
from cronwarden.adapters.gcp.settings import GcpSettings
from cronwarden.adapters.local.settings import LocalSettings
from cronwarden.model.errors import ConfigurationError

SECRET = "c2VjcmV0LWtleS1kby1ub3QtbG9n"


def test_each_cloud_reads_back_what_it_writes() -> None:
    gcp = GcpSettings(
        project="p",
        pubsub_emulator_host="127.0.0.1:1",
        dead_letter_topic="dlt",
        max_deliveries=7,
        ack_deadline=30,
        create_missing=False,
        run_retention=timedelta(days=3),
        wif_provider="projects/1/locations/global/workloadIdentityPools/x/providers/y",
        service_account="sa@p.iam.gserviceaccount.com",
        wif_audience="api://aud",
    )
    assert GcpSettings.from_env(gcp.to_env()) == gcp
    assert GcpSettings.from_env({}) == GcpSettings()
    azure = AzureSettings(
        storage_connection_string=f"AccountKey={SECRET}",
        servicebus_connection=f"SharedAccessKey={SECRET}",
        queue="runs",
        max_deliveries=4,
        schedules={schedule_setting("nightly-export"): "0 0 1 * * *"},
    )
    assert AzureSettings.from_env(azure.to_env()) == azure
    assert azure.schedule_for("nightly-export") == "0 0 1 * * *"
    assert SECRET not in repr(azure)
    assert LocalSettings.from_env(LocalSettings("x/state.db").to_env()) == LocalSettings(
        "x/state.db"
    )


@pytest.mark.parametrize(
    ("read", "env", "name"),
    [
        (
            GcpSettings.from_env,
            {"CRONWARDEN_GCP_ACK_DEADLINE": "601"},
            "CRONWARDEN_GCP_ACK_DEADLINE",
        ),
        (GcpSettings.from_env, {"CRONWARDEN_GCP_WIF_PROVIDER": "x"}, "CRONWARDEN_GCP_WIF_AUDIENCE"),
        (
            AzureSettings.from_env,
            {"CRONWARDEN_SERVICEBUS_MAX_DELIVERIES": "0"},
            "CRONWARDEN_SERVICEBUS_MAX_DELIVERIES",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(
    read: Callable[[Mapping[str, str]], object], env: dict[str, str], name: str
) -> None:
    with pytest.raises(ConfigurationError, match=name):
        read(env)


def test_the_azure_storage_connection_falls_back_to_the_sdk_name() -> None:
    env = {"AZURE_STORAGE_CONNECTION_STRING": f"AccountKey={SECRET}"}
    assert AzureSettings.from_env(env).storage_connection_string == f"AccountKey={SECRET}"
