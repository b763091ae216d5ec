"""The conformance suite every store and queue adapter passes, reusable by third parties.

Subclass the contract classes in a test module and provide the factory fixtures::

    from cronwarden.testing.conformance import QueueContract, StoreContract

    @pytest.fixture
    def store_factory(tmp_path):
        return lambda: MyStore(tmp_path / "db")  # or a context manager yielding one

    @pytest.fixture
    def queue_factory():
        return lambda max_deliveries=3: MyQueue(max_deliveries=max_deliveries)

    class TestMyStore(StoreContract): ...
    class TestMyQueue(QueueContract): ...

The same classes run in cronwarden's own ``tests/conformance`` against SQLite, the in-memory
backends, Firestore, Table Storage, Pub/Sub and Service Bus. Importing this module needs pytest.
"""

from __future__ import annotations

from ._collect import opened
from .queue import QueueContract, drain, receive_one, wait_for
from .store import StoreContract

__all__ = ["QueueContract", "StoreContract", "drain", "opened", "receive_one", "wait_for"]
