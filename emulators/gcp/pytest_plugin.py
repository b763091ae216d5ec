"""pytest fixtures for the official GCP emulators: one process each per test session.

Enable with ``pytest_plugins = ["cronwarden.emulators.gcp.pytest_plugin"]``. A fixture skips the
test only when the emulator binaries (or Java) are absent, with a reason saying how to install
them; a start failure of an installed emulator is an error, never a skip. Tests isolate
themselves by resource names (a topic per test, a Firestore project per test) or by ``reset()``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._sdk import missing_reason
from .emulator import FirestoreEmulator, PubSubEmulator


def _skip_if_missing(which: str) -> None:
    reason = missing_reason(which)
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def pubsub_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PubSubEmulator]:
    """A running Pub/Sub emulator shared by the session (``.address``, ``.reset()``)."""
    _skip_if_missing("pubsub")
    with PubSubEmulator(log_dir=str(tmp_path_factory.mktemp("pubsub-emulator"))) as emulator:
        yield emulator


@pytest.fixture(scope="session")
def firestore_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FirestoreEmulator]:
    """A running Firestore emulator shared by the session (``.address``, ``.reset(project)``)."""
    _skip_if_missing("firestore")
    with FirestoreEmulator(log_dir=str(tmp_path_factory.mktemp("firestore-emulator"))) as emulator:
        yield emulator
