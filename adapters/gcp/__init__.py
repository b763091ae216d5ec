"""The GCP provider: Firestore store, Pub/Sub queue (with dead-lettering).

Importing this package imports no Google SDK; the clients (and ``google.cloud``) load when an
adapter first talks to its service. See ``docs/gcp.md`` for the layout and resources.
"""

from __future__ import annotations

from .provider import GcpProvider
from .queue import PubSubQueue, validate_max_deliveries
from .store import FirestoreStore

__all__ = ["FirestoreStore", "GcpProvider", "PubSubQueue", "validate_max_deliveries"]
