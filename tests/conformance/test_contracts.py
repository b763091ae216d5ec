"""The store and queue contracts (``cronwarden.testing.conformance``) on every backend of
``tests/backends.py``; the factories are the parametrised fixtures of ``conftest.py``."""

from __future__ import annotations

from cronwarden.testing.conformance import QueueContract, StoreContract


class TestStore(StoreContract):
    pass


class TestQueue(QueueContract):
    pass
