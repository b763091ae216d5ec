"""The providers a switch runs between, each configured by its environment (what the CLI's
``--from-env`` / ``--to-env`` file holds) and built from that same environment here."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from .harness import SideSpec


def local_side(folder: Path, label: str) -> SideSpec:
    folder.mkdir(parents=True, exist_ok=True)
    env = {"CRONWARDEN_LOCAL_PATH": str(folder / "state.db")}

    def build() -> Any:
        from cronwarden.adapters.local import LocalProvider

        return LocalProvider(env["CRONWARDEN_LOCAL_PATH"])

    return SideSpec("local", env, build, label)


def postgres_side(dsn: str, schema: str) -> SideSpec:
    env = {"CRONWARDEN_POSTGRES_DSN": dsn, "CRONWARDEN_POSTGRES_SCHEMA": schema}

    def build() -> Any:
        from cronwarden.adapters.postgres import PostgresProvider

        return PostgresProvider.from_env(env)

    return SideSpec("postgres", env, build)


def gcp_side(firestore: Any, pubsub: Any) -> SideSpec:
    env = {
        "CRONWARDEN_GCP_PROJECT": f"cw-migrate-{uuid.uuid4().hex[:8]}",
        "FIRESTORE_EMULATOR_HOST": firestore.address,
        "PUBSUB_EMULATOR_HOST": pubsub.address,
        "CRONWARDEN_GCP_CREATE_MISSING": "1",
    }

    def build() -> Any:
        from cronwarden.adapters.gcp import GcpProvider

        return GcpProvider.from_env(env)

    return SideSpec("gcp", env, build)


def azure_side(azurite: Any, table: str, servicebus: Any) -> SideSpec:
    queue = servicebus.create_queue(
        max_delivery_count=10, lock_duration=5.0, requires_duplicate_detection=True
    )
    env = {
        "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string,
        "CRONWARDEN_AZURE_TABLE": table,
        "CRONWARDEN_SERVICEBUS_CONNECTION": servicebus.connection_string,
        "CRONWARDEN_SERVICEBUS_QUEUE": queue,
    }

    def build() -> Any:
        from cronwarden.adapters.azure import AzureProvider
        from cronwarden.adapters.azure.settings import AzureSettings

        return AzureProvider(settings=AzureSettings.from_env(env))

    return SideSpec("azure", env, build)


def aws_side(moto: Any) -> SideSpec:
    settings = moto.settings()
    env = {**moto.env(), **settings.to_env()}

    def build() -> Any:
        from cronwarden.adapters.aws import AwsProvider

        return AwsProvider(settings)

    return SideSpec("aws", env, build)
