"""The GCP provider: a :class:`FirestoreStore` and a :class:`PubSubQueue`, configured from
explicit arguments or the environment (:meth:`GcpProvider.from_env`).

Environment (all optional except the project; names, defaults and bounds in
:mod:`.settings`, :class:`~.settings.GcpSettings`):

=====================================  ===================================================
``CRONWARDEN_GCP_PROJECT``             project id (else ``GOOGLE_CLOUD_PROJECT``,
                                       ``GCLOUD_PROJECT``, ``GCP_PROJECT``)
``FIRESTORE_EMULATOR_HOST``            ``host:port`` of a Firestore emulator
``PUBSUB_EMULATOR_HOST``               ``host:port`` of a Pub/Sub emulator
``CRONWARDEN_GCP_TOPIC``               run-request topic (``cronwarden-runs``)
``CRONWARDEN_GCP_SUBSCRIPTION``        worker subscription (``cronwarden-worker``)
``CRONWARDEN_GCP_DEAD_LETTER_TOPIC``   (``<topic>-dead-letter``)
``CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION``  (``<subscription>-dead-letter``)
``CRONWARDEN_GCP_MAX_DELIVERIES``      deadLetterPolicy attempts, 5..100 (5)
``CRONWARDEN_GCP_ACK_DEADLINE``        seconds, 10..600 (60)
``CRONWARDEN_GCP_CREATE_MISSING``      create absent topics/subscriptions (default: on
                                       when ``PUBSUB_EMULATOR_HOST`` is set, else off)
``CRONWARDEN_FIRESTORE_DATABASE``      database id (``(default)``)
``CRONWARDEN_FIRESTORE_PREFIX``        collection prefix (``cw_``)
``CRONWARDEN_FIRESTORE_RUN_RETENTION`` run records' TTL after last write (``90d``)
``CRONWARDEN_FIRESTORE_ITEM_RETENTION`` ledger items' TTL after last write (``30d``)
``CRONWARDEN_GCP_WIF_PROVIDER``        workload identity provider for a reader outside GCP
                                       (the Azure-hosted watcher), with
``CRONWARDEN_GCP_SERVICE_ACCOUNT``     the service account it impersonates and
``CRONWARDEN_GCP_WIF_AUDIENCE``        the audience of the Azure managed-identity token
``CRONWARDEN_GCP_WIF_SOURCE``          ``aws`` for a reader on AWS (Lambda: its role's
                                       credentials from the environment; no audience)
=====================================  ===================================================

Without federation settings the clients use Application Default Credentials.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import ITEM, RUN, Provider

from .queue import MIN_DELIVERIES, PubSubQueue
from .settings import (
    DEFAULT_SUBSCRIPTION,
    DEFAULT_TOPIC,
    PROJECT_ENV,
    PROJECT_FALLBACK_ENVS,
    GcpSettings,
)
from .store import DEFAULT_PREFIX, DEFAULT_RETENTION, FirestoreStore


def _federation_from(settings: GcpSettings, env: Mapping[str, str]) -> Callable[[], Any] | None:
    """A shared, lazily built credentials factory when workload identity federation is set."""
    if not settings.federated:
        return None
    snapshot = dict(env)

    @functools.cache
    def credentials() -> Any:
        from ._federation import federated_credentials

        return federated_credentials(
            settings.wif_provider,
            settings.service_account,
            settings.wif_audience,
            snapshot,
            source=settings.wif_source,
        )

    return credentials


class GcpProvider(Provider):
    """Firestore for state and Pub/Sub for run requests; both clients created on first use."""

    name = "gcp"

    def __init__(
        self,
        project: str,
        *,
        firestore_emulator_host: str | None = None,
        pubsub_emulator_host: str | None = None,
        topic: str = DEFAULT_TOPIC,
        subscription: str = DEFAULT_SUBSCRIPTION,
        dead_letter_topic: str | None = None,
        dead_letter_subscription: str | None = None,
        max_deliveries: int = MIN_DELIVERIES,
        ack_deadline: int = 60,
        retry_backoff: tuple[float, float] | None = (10.0, 600.0),
        create_missing: bool = False,
        database: str = "(default)",
        collection_prefix: str = DEFAULT_PREFIX,
        retention: Mapping[str, timedelta] | None = None,
        credentials: Any = None,
    ) -> None:
        if not project:
            raise ConfigurationError(
                f"the GCP provider needs a project id: set {PROJECT_ENV} "
                f"(or {PROJECT_FALLBACK_ENVS[0]})"
            )
        self.project = project
        self._store_options: dict[str, Any] = {
            "database": database,
            "emulator_host": firestore_emulator_host,
            "collection_prefix": collection_prefix,
            "retention": retention,
            "credentials": credentials,
        }
        # Built (and validated: max_deliveries, ack deadline, backoff) now; it connects lazily.
        self._queue = PubSubQueue(
            project,
            topic,
            subscription,
            dead_letter_topic=dead_letter_topic,
            dead_letter_subscription=dead_letter_subscription,
            max_deliveries=max_deliveries,
            ack_deadline=ack_deadline,
            retry_backoff=retry_backoff,
            emulator_host=pubsub_emulator_host,
            create_missing=create_missing,
            credentials=credentials,
        )
        self._store: FirestoreStore | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> GcpProvider:
        """Build from environment variables (see the module docs); keyword overrides win."""
        env = os.environ if environ is None else environ
        settings = GcpSettings.from_env(env)
        project = overrides.pop("project", None) or settings.project
        retention = dict(DEFAULT_RETENTION)
        if settings.run_retention is not None:
            retention[RUN] = settings.run_retention
        if settings.item_retention is not None:
            retention[ITEM] = settings.item_retention
        options: dict[str, Any] = {
            "firestore_emulator_host": settings.firestore_emulator_host or None,
            "pubsub_emulator_host": settings.pubsub_emulator_host or None,
            "topic": settings.topic,
            "subscription": settings.subscription,
            "dead_letter_topic": settings.dead_letter_topic or None,
            "dead_letter_subscription": settings.dead_letter_subscription or None,
            "max_deliveries": settings.max_deliveries,
            "ack_deadline": settings.ack_deadline,
            "create_missing": settings.creates_missing,
            "database": settings.database,
            "collection_prefix": settings.collection_prefix,
            "retention": retention,
            "credentials": _federation_from(settings, env),
        }
        options.update(overrides)
        return cls(project, **options)

    def store(self) -> FirestoreStore:
        if self._store is None:
            self._store = FirestoreStore(self.project, **self._store_options)
        return self._store

    def queue(self) -> PubSubQueue:
        return self._queue

    def close(self) -> None:
        """Close both clients; the provider reconnects if used again."""
        if self._store is not None:
            self._store.close()
            self._store = None
        self._queue.close()
