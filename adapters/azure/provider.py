"""The Azure provider: Table Storage store now; the Service Bus queue comes in the next phase."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from cronwarden.errors import ConfigurationError
from cronwarden.ports import Provider, Queue

from .store import DEFAULT_TABLE, TableStore

ENV_CONNECTION_STRING = "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING"
ENV_FALLBACK_CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"
ENV_ACCOUNT_URL = "CRONWARDEN_AZURE_TABLE_ACCOUNT_URL"
ENV_TABLE = "CRONWARDEN_AZURE_TABLE"


class AzureProvider(Provider):
    """State in Azure Table Storage (or Azurite); the queue is not implemented yet.

    Configure with ``connection_string`` (or ``$CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING``,
    then ``$AZURE_STORAGE_CONNECTION_STRING``), or with ``account_url`` (or
    ``$CRONWARDEN_AZURE_TABLE_ACCOUNT_URL``) plus an SDK ``credential``. ``table`` defaults to
    ``$CRONWARDEN_AZURE_TABLE`` or ``cronwarden``. The store is built on first use; building
    it creates the table if missing. Secrets are never put into error messages.
    """

    name = "azure"

    def __init__(
        self,
        *,
        connection_string: str | None = None,
        account_url: str | None = None,
        credential: Any = None,
        table: str | None = None,
        **table_options: Any,
    ) -> None:
        self._connection_string = (
            connection_string
            or os.environ.get(ENV_CONNECTION_STRING)
            or os.environ.get(ENV_FALLBACK_CONNECTION_STRING)
        )
        self._account_url = account_url or os.environ.get(ENV_ACCOUNT_URL)
        self._credential = credential
        self.table = table or os.environ.get(ENV_TABLE) or DEFAULT_TABLE
        self._table_options = table_options
        self._store: TableStore | None = None
        if not self._connection_string and not self._account_url:
            raise ConfigurationError(
                "Azure provider: set a storage connection string "
                f"(${ENV_CONNECTION_STRING}) or an account URL (${ENV_ACCOUNT_URL}) with a "
                "credential"
            )
        if not self._connection_string and credential is None:
            raise ConfigurationError(
                "Azure provider: an account URL needs a credential (AzureNamedKeyCredential, "
                "AzureSasCredential or a token credential)"
            )

    @classmethod
    def from_env(cls, **options: Any) -> AzureProvider:
        """The provider configured from the environment (keyword ``options`` override it)."""
        if importlib.util.find_spec("azure.data.tables") is None:
            raise ConfigurationError(
                "the Azure provider needs the Azure SDK: pip install 'cronwarden[azure]'"
            )
        return cls(**options)

    def store(self) -> TableStore:
        if self._store is None:
            if self._connection_string:
                self._store = TableStore.from_connection_string(
                    self._connection_string, self.table, **self._table_options
                )
            else:
                assert self._account_url is not None
                self._store = TableStore.from_account_url(
                    self._account_url, self._credential, self.table, **self._table_options
                )
        return self._store

    def queue(self) -> Queue:
        raise NotImplementedError(
            "the Azure Service Bus queue is not implemented yet (issue #5, phase 2); use the "
            "Table Storage store with another queue in the meantime"
        )

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __repr__(self) -> str:  # never shows the connection string
        target = "connection string" if self._connection_string else self._account_url
        return f"AzureProvider(table={self.table!r}, via={target!r})"
