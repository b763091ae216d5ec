"""The Azure provider: Table Storage store and Service Bus queue, configured from the environment.

=========================================  =====================================================
``CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING``  Table Storage by connection string (Azurite, local)
(or ``AZURE_STORAGE_CONNECTION_STRING``)
``CRONWARDEN_AZURE_TABLE_ACCOUNT_URL``       Table endpoint, identity auth (managed identity /
                                             ``DefaultAzureCredential``, or Google federation
                                             with ``CRONWARDEN_AZURE_FEDERATION=google``)
``CRONWARDEN_AZURE_TABLE``                   table name (``cronwarden``)
``CRONWARDEN_SERVICEBUS_CONNECTION``         Service Bus connection string (emulator, local)
``CRONWARDEN_SERVICEBUS_NAMESPACE``          fully qualified namespace, identity auth
``CRONWARDEN_SERVICEBUS_QUEUE``              queue name (``cronwarden-runs``)
``CRONWARDEN_SERVICEBUS_MAX_DELIVERIES``     the queue's MaxDeliveryCount (10)
=========================================  =====================================================
"""

from __future__ import annotations

import importlib.util
from typing import Any

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Provider

from .servicebus import ServiceBusQueue
from .settings import (
    MAX_DELIVERIES_ENV,
    QUEUE_ENV,
    SERVICEBUS_CONNECTION_ENV,
    SERVICEBUS_NAMESPACE_ENV,
    STORAGE_CONNECTION_ENV,
    STORAGE_CONNECTION_FALLBACK_ENV,
    TABLE_ACCOUNT_URL_ENV,
    TABLE_ENV,
    AzureSettings,
)
from .store import TableStore

# The old names of the settings' environment constants (see :mod:`.settings`).
ENV_CONNECTION_STRING = STORAGE_CONNECTION_ENV
ENV_FALLBACK_CONNECTION_STRING = STORAGE_CONNECTION_FALLBACK_ENV
ENV_ACCOUNT_URL = TABLE_ACCOUNT_URL_ENV
ENV_TABLE = TABLE_ENV
ENV_SB_CONNECTION = SERVICEBUS_CONNECTION_ENV
ENV_SB_NAMESPACE = SERVICEBUS_NAMESPACE_ENV
ENV_SB_QUEUE = QUEUE_ENV
ENV_SB_MAX_DELIVERIES = MAX_DELIVERIES_ENV


class AzureProvider(Provider):
    """State in Azure Table Storage (or Azurite), run requests on Service Bus.

    Configure with ``connection_string`` (or ``$CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING``,
    then ``$AZURE_STORAGE_CONNECTION_STRING``), or with ``account_url`` (or
    ``$CRONWARDEN_AZURE_TABLE_ACCOUNT_URL``) plus an SDK ``credential`` (default: built from the
    environment, see :mod:`._credentials`). ``table`` defaults to ``$CRONWARDEN_AZURE_TABLE``
    or ``cronwarden``. The queue: ``servicebus_connection`` / ``servicebus_namespace`` /
    ``queue_name`` / ``max_deliveries``; what is not given comes from ``settings`` (default:
    :meth:`AzureSettings.from_env`, names in :mod:`.settings`). Store and
    queue are built on first use and reused; building the store creates the table if missing.
    Secrets are never put into error messages.
    """

    name = "azure"

    def __init__(
        self,
        *,
        connection_string: str | None = None,
        account_url: str | None = None,
        credential: Any = None,
        table: str | None = None,
        servicebus_connection: str | None = None,
        servicebus_namespace: str | None = None,
        queue_name: str | None = None,
        max_deliveries: int | None = None,
        settings: AzureSettings | None = None,
        **table_options: Any,
    ) -> None:
        env = settings or AzureSettings.from_env()
        self._connection_string = connection_string or env.storage_connection_string
        self._account_url = account_url or env.table_account_url
        self._credential = credential
        self.table = table or env.table
        self._table_options = table_options
        self._store: TableStore | None = None
        self._queue: ServiceBusQueue | None = None
        self._sb_connection = servicebus_connection or env.servicebus_connection
        self._sb_namespace = servicebus_namespace or env.servicebus_namespace
        self.queue_name = queue_name or env.queue
        self.max_deliveries = max_deliveries or env.max_deliveries
        if not self._connection_string and not self._account_url:
            raise ConfigurationError(
                "Azure provider: set a storage connection string "
                f"(${ENV_CONNECTION_STRING}) or an account URL (${ENV_ACCOUNT_URL}) with a "
                "credential"
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
                    self._account_url, self.credential, self.table, **self._table_options
                )
        return self._store

    @property
    def credential(self) -> Any:
        """The credential for identity-based access, built from the environment on first use."""
        if self._credential is None:
            from ._credentials import credential_from_env

            self._credential = credential_from_env()
        return self._credential

    def queue(self) -> ServiceBusQueue:
        if self._queue is None:
            if self._sb_connection:
                self._queue = ServiceBusQueue.from_connection_string(
                    self._sb_connection, self.queue_name, max_deliveries=self.max_deliveries
                )
            elif self._sb_namespace:
                self._queue = ServiceBusQueue.from_namespace(
                    self._sb_namespace,
                    self.credential,
                    self.queue_name,
                    max_deliveries=self.max_deliveries,
                )
            else:
                raise ConfigurationError(
                    f"Azure provider: set ${ENV_SB_NAMESPACE} (fully qualified, identity auth) "
                    f"or ${ENV_SB_CONNECTION} (local / emulator) for the Service Bus queue"
                )
        return self._queue

    def close(self) -> None:
        if self._queue is not None:
            self._queue.close()
            self._queue = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def __repr__(self) -> str:  # never shows the connection string
        target = "connection string" if self._connection_string else self._account_url
        return f"AzureProvider(table={self.table!r}, via={target!r})"
