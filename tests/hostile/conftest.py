"""The stores of ``tests/backends.py`` (SQLite, PostgreSQL, Firestore, Table Storage, DynamoDB),
with the emulator marks of each; a fresh, empty store per test.

Not ``cronwarden.testing.MemoryStore``: it keeps a lone surrogate (and merges an adjacent pair
into another character on its JSON round trip) where every real store refuses it; making it
refuse like them is a change of ``core/testing``, outside this suite's task."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cronwarden.model.ports import Store
from tests.backends import MARKS, STORES


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in STORES if n != "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with STORES[request.param](request, tmp_path) as made:
        yield made
