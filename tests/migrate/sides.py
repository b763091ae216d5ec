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
