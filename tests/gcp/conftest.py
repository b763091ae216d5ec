"""Fixtures for the GCP adapter tests: a fresh Firestore project / Pub/Sub namespace per test
on the session's emulators (from ``cronwarden.emulators.gcp.pytest_plugin``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronwarden.adapters.gcp import FirestoreStore, PubSubQueue
from cronwarden.emulators.gcp import FirestoreEmulator, PubSubEmulator


def fresh_project() -> str:
    return f"cw-gcp-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def fs_store(firestore_emulator: FirestoreEmulator) -> Iterator[FirestoreStore]:
    store = FirestoreStore(fresh_project(), emulator_host=firestore_emulator.address)
    yield store
    store.close()


@pytest.fixture
def make_queue(pubsub_emulator: PubSubEmulator) -> Iterator[Callable[..., PubSubQueue]]:
    """Call with PubSubQueue keyword options; resources are created in a fresh project."""
    made: list[PubSubQueue] = []

    def make(**options: Any) -> PubSubQueue:
        settings: dict[str, Any] = {
            "retry_backoff": (0.0, 1.0),
            "emulator_host": pubsub_emulator.address,
            "create_missing": True,
            **options,
        }
        queue = PubSubQueue(fresh_project(), "runs", "worker", **settings)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.close()
