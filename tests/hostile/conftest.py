"""The stores of ``tests/backends.py`` (``cronwarden.testing.MemoryStore``, SQLite, PostgreSQL,
Firestore, Table Storage, DynamoDB), with the emulator marks of each; a fresh, empty store per
test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cronwarden.model.ports import Store
from tests.backends import MARKS, STORES


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in STORES])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with STORES[request.param](request, tmp_path) as made:
        yield made
