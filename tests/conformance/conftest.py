from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from cronwarden.model.ports import Queue, Store
from tests.backends import MARKS, QUEUES, STORES


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in STORES])
def store_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Callable[[], AbstractContextManager[Store]]:
    """Call to get a context manager of a fresh store of this backend (the contract's factory)."""
    return lambda: STORES[request.param](request, tmp_path)


@pytest.fixture
def store(store_factory: Callable[[], AbstractContextManager[Store]]) -> Iterator[Store]:
    with store_factory() as s:
        yield s


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in QUEUES])
def queue_factory(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Call with keyword options (``max_deliveries``) to get a context manager of a fresh queue."""

    def make(**options):  # type: ignore[no-untyped-def]
        return QUEUES[request.param](request, tmp_path, **options)

    return make


@pytest.fixture
def queue(queue_factory) -> Iterator[Queue]:  # type: ignore[no-untyped-def]
    with queue_factory(max_deliveries=3) as q:
        yield q
