"""The GCP provider: a :class:`FirestoreStore` and a :class:`PubSubQueue`, configured from
explicit arguments or the environment (:meth:`GcpProvider.from_env`).

Environment (all optional except the project):

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
=====================================  ===================================================

Without federation settings the clients use Application Default Credentials.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from cronwarden.durations import parse_duration
from cronwarden.errors import ConfigurationError
from cronwarden.ports import ITEM, RUN, Provider

from .queue import MIN_DELIVERIES, PubSubQueue
from .store import DEFAULT_PREFIX, DEFAULT_RETENTION, FirestoreStore

DEFAULT_TOPIC = "cronwarden-runs"
DEFAULT_SUBSCRIPTION = "cronwarden-worker"
_PROJECT_VARS = ("CRONWARDEN_GCP_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GCP_PROJECT")


def _flag(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None


def _federation_from_env(env: Mapping[str, str]) -> Callable[[], Any] | None:
    """A shared, lazily built credentials factory when workload identity federation is set."""
    names = (
        "CRONWARDEN_GCP_WIF_PROVIDER",
        "CRONWARDEN_GCP_SERVICE_ACCOUNT",
        "CRONWARDEN_GCP_WIF_AUDIENCE",
    )
    values = [env.get(name) or "" for name in names]
    if not any(values):
        return None
    if not all(values):
        missing = [n for n, v in zip(names, values, strict=True) if not v]
        raise ConfigurationError(f"workload identity federation also needs {', '.join(missing)}")
    provider, account, audience = values
    snapshot = dict(env)

    @functools.cache
    def credentials() -> Any:
        from ._federation import federated_credentials

        return federated_credentials(provider, account, audience, snapshot)

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
                "the GCP provider needs a project id: set CRONWARDEN_GCP_PROJECT "
                "(or GOOGLE_CLOUD_PROJECT)"
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
        project = overrides.pop("project", None) or next(
            (env[v] for v in _PROJECT_VARS if env.get(v)), ""
        )
        pubsub_host = env.get("PUBSUB_EMULATOR_HOST") or None
        create = env.get("CRONWARDEN_GCP_CREATE_MISSING")
        retention = dict(DEFAULT_RETENTION)
        for kind, var in (
            (RUN, "CRONWARDEN_FIRESTORE_RUN_RETENTION"),
            (ITEM, "CRONWARDEN_FIRESTORE_ITEM_RETENTION"),
        ):
            if env.get(var):
                try:
                    retention[kind] = parse_duration(env[var], field=var)
                except ValueError as exc:
                    raise ConfigurationError(str(exc)) from None
        options: dict[str, Any] = {
            "firestore_emulator_host": env.get("FIRESTORE_EMULATOR_HOST") or None,
            "pubsub_emulator_host": pubsub_host,
            "topic": env.get("CRONWARDEN_GCP_TOPIC") or DEFAULT_TOPIC,
            "subscription": env.get("CRONWARDEN_GCP_SUBSCRIPTION") or DEFAULT_SUBSCRIPTION,
            "dead_letter_topic": env.get("CRONWARDEN_GCP_DEAD_LETTER_TOPIC") or None,
            "dead_letter_subscription": env.get("CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION") or None,
            "max_deliveries": _int(env, "CRONWARDEN_GCP_MAX_DELIVERIES", MIN_DELIVERIES),
            "ack_deadline": _int(env, "CRONWARDEN_GCP_ACK_DEADLINE", 60),
            "create_missing": _flag(create) if create is not None else pubsub_host is not None,
            "database": env.get("CRONWARDEN_FIRESTORE_DATABASE") or "(default)",
            "collection_prefix": env.get("CRONWARDEN_FIRESTORE_PREFIX") or DEFAULT_PREFIX,
            "retention": retention,
            "credentials": _federation_from_env(env),
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
