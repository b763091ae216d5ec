"""Live switches between providers with ``cronwarden migrate`` (:mod:`.scenario`): local ->
Postgres, local -> GCP, GCP -> Azure, Azure -> AWS, AWS -> local, each with both sides firing
throughout, a half-done ledger, a dead letter and a pause, the migration killed once and resumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import SideSpec
from .scenario import switch
from .sides import aws_side, azure_side, gcp_side, local_side, postgres_side

pytestmark = [pytest.mark.slow]


@pytest.fixture
def local_source(tmp_path: Path) -> SideSpec:
    return local_side(tmp_path / "source", "local")


@pytest.mark.postgres
def test_local_to_postgres(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    local_source: SideSpec,
    postgres_dsn: str,
    postgres_schema: str,
) -> None:
    switch(tmp_path, monkeypatch, local_source, postgres_side(postgres_dsn, postgres_schema))


@pytest.mark.gcp
def test_local_to_gcp(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    local_source: SideSpec,
    firestore_emulator: object,
    pubsub_emulator: object,
) -> None:
    switch(tmp_path, monkeypatch, local_source, gcp_side(firestore_emulator, pubsub_emulator))


@pytest.mark.gcp
@pytest.mark.azure
def test_gcp_to_azure(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    firestore_emulator: object,
    pubsub_emulator: object,
    azurite: object,
    azurite_table: str,
    servicebus_emulator: object,
) -> None:
    source = gcp_side(firestore_emulator, pubsub_emulator)
    target = azure_side(azurite, azurite_table, servicebus_emulator)
    switch(tmp_path, monkeypatch, source, target)


@pytest.mark.azure
@pytest.mark.aws
def test_azure_to_aws(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    azurite: object,
    azurite_table: str,
    servicebus_emulator: object,
    moto_server: object,
) -> None:
    source = azure_side(azurite, azurite_table, servicebus_emulator)
    switch(tmp_path, monkeypatch, source, aws_side(moto_server))


@pytest.mark.aws
def test_aws_to_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: object) -> None:
    switch(tmp_path, monkeypatch, aws_side(moto_server), local_side(tmp_path / "target", "local"))
