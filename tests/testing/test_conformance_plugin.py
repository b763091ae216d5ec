"""The conformance suite as a third party uses it: subclass a contract, provide a factory."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cronwarden.model.ports import Store
from cronwarden.testing import MemoryStore
from cronwarden.testing.conformance import StoreContract, opened

made: list[MemoryStore] = []


@pytest.fixture
def store_factory() -> Callable[[], Store]:
    """A third party's factory: returns the store itself (no context manager)."""

    def make() -> Store:
        store = MemoryStore(max_commit_ops=120)
        made.append(store)
        return store

    return make


class TestThirdPartyStore(StoreContract):
    def test_each_test_gets_a_fresh_store(self, store: Store) -> None:
        assert store is made[-1]
        assert store.round_trips == 0


def test_opened_closes_a_plain_backend_after_use() -> None:
    class Backend:
        closed = 0

        def close(self) -> None:
            self.closed += 1

    backend = Backend()
    with opened(backend) as value:
        assert value is backend and backend.closed == 0
    assert backend.closed == 1


def test_the_contract_classes_are_not_collected_by_themselves() -> None:
    assert not StoreContract.__name__.startswith("Test")
    assert callable(StoreContract.test_create_race_has_exactly_one_winner)
