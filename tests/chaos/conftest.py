"""Chaos harness fixtures: provider stacks, the results table, the report.

``CW_CHAOS=full`` runs every scenario at full size (``nox -s chaos``); without it only the fast
subset runs (tests marked ``chaos`` but not ``chaos_full``), small, in the normal test run.
``CW_CHAOS_REPORT=path.json`` writes the JSON report there and the markdown table next to
``CW_CHAOS_REPORT_MD`` (default ``docs/chaos-report.md``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from .report import write
from .stacks import PROVIDERS, Stack

FULL = os.environ.get("CW_CHAOS") == "full"
ROWS: list[dict[str, Any]] = []
STARTED = time.time()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("chaos_full") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get("CW_CHAOS_REPORT")
    if target and ROWS:
        md = Path(os.environ.get("CW_CHAOS_REPORT_MD", "docs/chaos-report.md"))
        write(ROWS, Path(target), md, STARTED)


@pytest.fixture(
    params=[
        pytest.param("local"),
        pytest.param("gcp", marks=pytest.mark.gcp),
        pytest.param("azure", marks=pytest.mark.azure),
        pytest.param("aws", marks=pytest.mark.aws),
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("s3", marks=pytest.mark.aws),
        pytest.param("blob", marks=pytest.mark.azure),
        pytest.param("gcs", marks=pytest.mark.gcp),
    ]
)
def stack(request: pytest.FixtureRequest) -> Stack:
    name = request.param
    assert name in PROVIDERS
    emulators: dict[str, Any] = {}
    if name == "gcp":
        emulators = {
            "firestore": request.getfixturevalue("firestore_emulator"),
            "pubsub": request.getfixturevalue("pubsub_emulator"),
        }
    elif name == "azure":
        emulators = {
            "azurite": request.getfixturevalue("azurite"),
            "servicebus": request.getfixturevalue("servicebus_emulator"),
        }
    elif name in ("aws", "s3"):
        emulators = {"moto": request.getfixturevalue("moto_server")}
    elif name == "gcs":
        from tests.backends import fake_gcs

        emulators = {
            "gcs": fake_gcs(request),
            "pubsub": request.getfixturevalue("pubsub_emulator"),
        }
    elif name == "blob":
        from tests.backends import blob_azurite

        emulators = {
            "azurite_blob": blob_azurite(request),
            "servicebus": request.getfixturevalue("servicebus_emulator"),
        }
    elif name == "postgres":
        emulators = {"postgres": request.getfixturevalue("postgres_server")}
    elif name == "redis":
        emulators = {"redis": request.getfixturevalue("redis_server")}
    return Stack(name, emulators)


@pytest.fixture
def results() -> Any:
    return ROWS
