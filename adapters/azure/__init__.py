"""The Azure provider: Table Storage store, Service Bus queue, azure-functions app.

Importing this package does not import the Azure SDK; building a store does.
"""

from __future__ import annotations

from .errors import TableLimitError
from .provider import AzureProvider
from .servicebus import ServiceBusQueue
from .store import TableStore

__all__ = ["AzureProvider", "ServiceBusQueue", "TableLimitError", "TableStore"]
