"""Moved: the functions-framework host lives in :mod:`cronwarden.emulators.gcp.functions_host`.
This module keeps the old import path for the tests (and their default job module)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cronwarden.emulators.gcp import functions_host
from cronwarden.emulators.gcp.emulator import FirestoreEmulator, PubSubEmulator
from cronwarden.emulators.gcp.functions_host import (
    MAIN,
    TARGETS,
    Deployment,
    LoopbackServer,
    SetsEnv,
    WebhookSink,
    fresh_project,
    gcp_env,
    post,
)


@contextlib.contextmanager
def deployed(
    tmp_path: Path,
    monkeypatch: SetsEnv,
    pubsub: PubSubEmulator,
    firestore: FirestoreEmulator,
    *,
    module: str = "tests.gcp.e2e_jobs",
    **options: Any,
) -> Iterator[Deployment]:
    """:func:`cronwarden.emulators.gcp.functions_host.deployed` serving ``tests.gcp.e2e_jobs``."""
    with functions_host.deployed(
        tmp_path, monkeypatch, pubsub, firestore, module=module, **options
    ) as deployment:
        yield deployment


__all__ = [
    "MAIN",
    "TARGETS",
    "Deployment",
    "LoopbackServer",
    "WebhookSink",
    "deployed",
    "fresh_project",
    "gcp_env",
    "post",
]
