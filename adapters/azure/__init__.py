"""The Azure provider: Table Storage store (Service Bus queue to come).

Importing this package does not import the Azure SDK; building a store does.
"""

from __future__ import annotations

from .errors import TableLimitError
from .provider import AzureProvider
from .store import TableStore

__all__ = ["AzureProvider", "TableLimitError", "TableStore"]
