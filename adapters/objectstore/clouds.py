"""The ``blob`` and ``gcs`` providers: the object store (:class:`~.store.ObjectStore`) on Azure
Blob Storage with the ``azure`` provider's Service Bus queue, and on Google Cloud Storage with
the ``gcp`` provider's Pub/Sub queue (the Table / Firestore stores of those providers are never
used).

Settings, from the environment (the queue's are the ``azure`` / ``gcp`` provider's own):

* ``blob``: ``CRONWARDEN_BLOB_CONTAINER`` [cronwarden], ``CRONWARDEN_BLOB_PREFIX`` [none],
  ``CRONWARDEN_BLOB_CREATE_MISSING`` (``1``: create the container; local use), and the storage
  connection string of the ``azure`` provider (``CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING``).
* ``gcs``: ``CRONWARDEN_GCS_BUCKET`` [cronwarden], ``CRONWARDEN_GCS_PREFIX`` [none],
  ``STORAGE_EMULATOR_HOST`` (an emulator, ``http://127.0.0.1:PORT``), and the ``gcp``
  provider's project and ``CRONWARDEN_GCP_CREATE_MISSING`` (for the bucket too).

Each store is built on first use, after :func:`~.objects.verify_preconditions` has checked that
the service honours conditional writes.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Provider, Queue

from .objects import ConditionalObjects
from .store import ObjectStore

ENV_BLOB_CONTAINER = "CRONWARDEN_BLOB_CONTAINER"
ENV_BLOB_PREFIX = "CRONWARDEN_BLOB_PREFIX"
ENV_BLOB_CREATE_MISSING = "CRONWARDEN_BLOB_CREATE_MISSING"
ENV_GCS_BUCKET = "CRONWARDEN_GCS_BUCKET"
ENV_GCS_PREFIX = "CRONWARDEN_GCS_PREFIX"
ENV_GCS_EMULATOR = "STORAGE_EMULATOR_HOST"
DEFAULT_NAME = "cronwarden"


def _text(env: Mapping[str, str], name: str, default: str = "") -> str:
    return env.get(name, "").strip() or default


class _ObjectProvider(Provider):
    """An object store built on first use by ``connect`` next to another provider's queue."""

    def __init__(self, connect: Callable[[], ConditionalObjects], prefix: str, queues: Any) -> None:
        self.prefix = prefix
        self._connect = connect
        self._queues = queues  # the azure / gcp provider: its queue only
        self._lock = threading.Lock()
        self._store: ObjectStore | None = None

    def store(self) -> ObjectStore:
        from .objects import verify_preconditions

        with self._lock:
            if self._store is None:
                objects = self._connect()
                try:
                    # an endpoint that ignores the preconditions must stop us here
                    verify_preconditions(objects, self.prefix)
                except BaseException:
                    objects.close()
                    raise
                self._store = ObjectStore(objects, self.prefix)
            return self._store

    def queue(self) -> Queue:
        queue: Queue = self._queues.queue()
        return queue

    def close(self) -> None:
        self._queues.close()
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


class BlobProvider(_ObjectProvider):
    """State in one Azure blob per job; run requests on the ``azure`` provider's Service Bus
    queue. Needs a storage connection string (identity-based Blob access is not built yet)."""

    name = "blob"

    def __init__(
        self,
        connection_string: str,
        container: str = DEFAULT_NAME,
        prefix: str = "",
        *,
        create_missing: bool = False,
        **azure_options: Any,
    ) -> None:
        from cronwarden.adapters.azure.provider import AzureProvider
        from cronwarden.adapters.azure.settings import STORAGE_CONNECTION_ENV

        if not connection_string:
            raise ConfigurationError(
                f"the blob provider needs a storage connection string: set "
                f"${STORAGE_CONNECTION_ENV}"
            )
        self.container = container

        def connect() -> ConditionalObjects:
            from .azure_blobs import BlobObjects

            return BlobObjects.from_connection_string(
                connection_string, container, create_missing=create_missing
            )

        queues = AzureProvider(connection_string=connection_string, **azure_options)
        super().__init__(connect, prefix, queues)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> BlobProvider:
        """The provider configured from the environment (keyword ``overrides`` win)."""
        if importlib.util.find_spec("azure.storage.blob") is None:
            raise ConfigurationError(
                "the blob provider needs azure-storage-blob: pip install 'cronwarden[azure]'"
            )
        from cronwarden.adapters.azure.settings import AzureSettings

        env = os.environ if environ is None else environ
        settings = AzureSettings.from_env(env)
        options: dict[str, Any] = {
            "connection_string": settings.storage_connection_string,
            "container": _text(env, ENV_BLOB_CONTAINER, DEFAULT_NAME),
            "prefix": _text(env, ENV_BLOB_PREFIX),
            "create_missing": _text(env, ENV_BLOB_CREATE_MISSING).lower() in {"1", "true", "yes"},
            "settings": settings,
        }
        options.update(overrides)
        return cls(**options)

    def __repr__(self) -> str:  # never shows the connection string
        return f"BlobProvider(container={self.container!r}, prefix={self.prefix!r})"


class GcsProvider(_ObjectProvider):
    """State in one GCS object per job; run requests on the ``gcp`` provider's Pub/Sub queue."""

    name = "gcs"

    def __init__(
        self,
        project: str,
        bucket: str = DEFAULT_NAME,
        prefix: str = "",
        *,
        emulator_host: str | None = None,
        create_missing: bool = False,
        **gcp_options: Any,
    ) -> None:
        from cronwarden.adapters.gcp.provider import GcpProvider

        queues = GcpProvider(project, create_missing=create_missing, **gcp_options)
        self.bucket = bucket

        def connect() -> ConditionalObjects:
            from .gcs import GcsObjects

            return GcsObjects.connect(
                bucket, project=project, emulator_host=emulator_host, create_missing=create_missing
            )

        super().__init__(connect, prefix, queues)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> GcsProvider:
        """The provider configured from the environment (keyword ``overrides`` win)."""
        if importlib.util.find_spec("google.cloud.storage") is None:
            raise ConfigurationError(
                "the gcs provider needs google-cloud-storage: pip install 'cronwarden[gcp]'"
            )
        from cronwarden.adapters.gcp.settings import GcpSettings

        env = os.environ if environ is None else environ
        settings = GcpSettings.from_env(env)
        options: dict[str, Any] = {
            "project": settings.project,
            "bucket": _text(env, ENV_GCS_BUCKET, DEFAULT_NAME),
            "prefix": _text(env, ENV_GCS_PREFIX),
            "emulator_host": _text(env, ENV_GCS_EMULATOR) or None,
            "create_missing": settings.creates_missing,
            "pubsub_emulator_host": settings.pubsub_emulator_host or None,
            "topic": settings.topic,
            "subscription": settings.subscription,
            "dead_letter_topic": settings.dead_letter_topic or None,
            "dead_letter_subscription": settings.dead_letter_subscription or None,
            "max_deliveries": settings.max_deliveries,
            "ack_deadline": settings.ack_deadline,
        }
        options.update(overrides)
        return cls(**options)

    def __repr__(self) -> str:
        return f"GcsProvider(bucket={self.bucket!r}, prefix={self.prefix!r})"


__all__ = ["BlobProvider", "GcsProvider"]
