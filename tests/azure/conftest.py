from __future__ import annotations

from collections.abc import Iterator

import pytest

from cronwarden.emulators.azurite import Azurite


@pytest.fixture
def table_store(azurite: Azurite, azurite_table: str) -> Iterator[object]:
    from cronwarden.adapters.azure import TableStore

    store = TableStore.from_connection_string(azurite.connection_string, azurite_table)
    try:
        yield store
    finally:
        store.close()
