"""Every setting of the GCP provider, its environment name, default and bounds, in one place.

The provider (:meth:`GcpProvider.from_env`), the test hosts and the bench read it; renderers
write it with :meth:`GcpSettings.to_env`. The ``*_ENV`` constants are the only spelling of each
environment name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from cronwarden.jobs.config import duration_text, env_duration, env_flag, env_int, env_text
from cronwarden.model.errors import ConfigurationError

from .queue import MAX_ACK_DEADLINE, MAX_DELIVERIES, MIN_DELIVERIES

PROJECT_ENV = "CRONWARDEN_GCP_PROJECT"
#: read after :data:`PROJECT_ENV`, in this order (what Google's own tools set)
PROJECT_FALLBACK_ENVS = ("GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GCP_PROJECT")
FIRESTORE_EMULATOR_ENV = "FIRESTORE_EMULATOR_HOST"
PUBSUB_EMULATOR_ENV = "PUBSUB_EMULATOR_HOST"
TOPIC_ENV = "CRONWARDEN_GCP_TOPIC"
SUBSCRIPTION_ENV = "CRONWARDEN_GCP_SUBSCRIPTION"
DEAD_LETTER_TOPIC_ENV = "CRONWARDEN_GCP_DEAD_LETTER_TOPIC"
DEAD_LETTER_SUBSCRIPTION_ENV = "CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION"
MAX_DELIVERIES_ENV = "CRONWARDEN_GCP_MAX_DELIVERIES"
ACK_DEADLINE_ENV = "CRONWARDEN_GCP_ACK_DEADLINE"
CREATE_MISSING_ENV = "CRONWARDEN_GCP_CREATE_MISSING"
FIRESTORE_DATABASE_ENV = "CRONWARDEN_FIRESTORE_DATABASE"
FIRESTORE_PREFIX_ENV = "CRONWARDEN_FIRESTORE_PREFIX"
RUN_RETENTION_ENV = "CRONWARDEN_FIRESTORE_RUN_RETENTION"
ITEM_RETENTION_ENV = "CRONWARDEN_FIRESTORE_ITEM_RETENTION"
WIF_PROVIDER_ENV = "CRONWARDEN_GCP_WIF_PROVIDER"
SERVICE_ACCOUNT_ENV = "CRONWARDEN_GCP_SERVICE_ACCOUNT"
WIF_AUDIENCE_ENV = "CRONWARDEN_GCP_WIF_AUDIENCE"
FEDERATION_ENVS = (WIF_PROVIDER_ENV, SERVICE_ACCOUNT_ENV, WIF_AUDIENCE_ENV)
#: where the federated reader runs: ``azure`` (default: a managed-identity token for
#: :data:`WIF_AUDIENCE_ENV`) or ``aws`` (the Lambda role's credentials sign a GetCallerIdentity
#: request; no audience)
WIF_SOURCE_ENV = "CRONWARDEN_GCP_WIF_SOURCE"
WIF_SOURCES = ("azure", "aws")

DEFAULT_TOPIC = "cronwarden-runs"
DEFAULT_SUBSCRIPTION = "cronwarden-worker"
DEFAULT_DATABASE = "(default)"
DEFAULT_FIRESTORE_PREFIX = "cw_"
MIN_ACK_DEADLINE = 10  #: seconds; Pub/Sub's lower bound (the upper: MAX_ACK_DEADLINE)
DEFAULT_ACK_DEADLINE = 60


@dataclass(frozen=True)
class GcpSettings:
    """The GCP provider's configuration (see the module constants for the names).

    ``create_missing`` ``None`` means "on when a Pub/Sub emulator is configured". Retentions
    ``None`` keep the store's defaults. Federation (all three or none; no audience when
    ``wif_source`` is ``aws``) lets a reader outside GCP (the watcher hosted on Azure or AWS)
    impersonate ``service_account``.
    """

    project: str = ""
    firestore_emulator_host: str = ""
    pubsub_emulator_host: str = ""
    topic: str = DEFAULT_TOPIC
    subscription: str = DEFAULT_SUBSCRIPTION
    dead_letter_topic: str = ""  #: empty: ``<topic>-dead-letter``
    dead_letter_subscription: str = ""  #: empty: ``<subscription>-dead-letter``
    max_deliveries: int = MIN_DELIVERIES
    ack_deadline: int = DEFAULT_ACK_DEADLINE
    create_missing: bool | None = None
    database: str = DEFAULT_DATABASE
    collection_prefix: str = DEFAULT_FIRESTORE_PREFIX
    run_retention: timedelta | None = None
    item_retention: timedelta | None = None
    wif_provider: str = ""
    service_account: str = ""
    wif_audience: str = ""
    wif_source: str = "azure"  #: :data:`WIF_SOURCES`

    @property
    def creates_missing(self) -> bool:
        if self.create_missing is not None:
            return self.create_missing
        return bool(self.pubsub_emulator_host)

    @property
    def federated(self) -> bool:
        return bool(self.wif_provider)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GcpSettings:
        """Read every setting; a bad value raises :class:`ConfigurationError` naming it."""
        env = os.environ if environ is None else environ
        project = next(
            (env_text(env, n) for n in (PROJECT_ENV, *PROJECT_FALLBACK_ENVS) if env_text(env, n)),
            "",
        )
        source = env_text(env, WIF_SOURCE_ENV, "azure").lower()
        if source not in WIF_SOURCES:
            raise ConfigurationError(
                f"{WIF_SOURCE_ENV}={source!r}: choose {' or '.join(WIF_SOURCES)}"
            )
        names = FEDERATION_ENVS if source == "azure" else FEDERATION_ENVS[:2]
        federation = [env_text(env, n) for n in FEDERATION_ENVS]
        needed = federation[: len(names)]
        if any(needed) and not all(needed):
            missing = [n for n, v in zip(names, needed, strict=True) if not v]
            raise ConfigurationError(
                f"workload identity federation also needs {', '.join(missing)}"
            )
        return cls(
            project=project,
            firestore_emulator_host=env_text(env, FIRESTORE_EMULATOR_ENV),
            pubsub_emulator_host=env_text(env, PUBSUB_EMULATOR_ENV),
            topic=env_text(env, TOPIC_ENV, DEFAULT_TOPIC),
            subscription=env_text(env, SUBSCRIPTION_ENV, DEFAULT_SUBSCRIPTION),
            dead_letter_topic=env_text(env, DEAD_LETTER_TOPIC_ENV),
            dead_letter_subscription=env_text(env, DEAD_LETTER_SUBSCRIPTION_ENV),
            max_deliveries=env_int(
                env, MAX_DELIVERIES_ENV, MIN_DELIVERIES, low=MIN_DELIVERIES, high=MAX_DELIVERIES
            ),
            ack_deadline=env_int(
                env,
                ACK_DEADLINE_ENV,
                DEFAULT_ACK_DEADLINE,
                low=MIN_ACK_DEADLINE,
                high=MAX_ACK_DEADLINE,
            ),
            create_missing=env_flag(env, CREATE_MISSING_ENV),
            database=env_text(env, FIRESTORE_DATABASE_ENV, DEFAULT_DATABASE),
            collection_prefix=env_text(env, FIRESTORE_PREFIX_ENV, DEFAULT_FIRESTORE_PREFIX),
            run_retention=env_duration(env, RUN_RETENTION_ENV),
            item_retention=env_duration(env, ITEM_RETENTION_ENV),
            wif_provider=federation[0],
            service_account=federation[1],
            wif_audience=federation[2],
            wif_source=source,
        )

    def to_env(self) -> dict[str, str]:
        """The environment that reads back as these settings (unset values left out)."""
        values: dict[str, str | None] = {
            PROJECT_ENV: self.project,
            FIRESTORE_EMULATOR_ENV: self.firestore_emulator_host,
            PUBSUB_EMULATOR_ENV: self.pubsub_emulator_host,
            TOPIC_ENV: self.topic,
            SUBSCRIPTION_ENV: self.subscription,
            DEAD_LETTER_TOPIC_ENV: self.dead_letter_topic,
            DEAD_LETTER_SUBSCRIPTION_ENV: self.dead_letter_subscription,
            MAX_DELIVERIES_ENV: str(self.max_deliveries),
            ACK_DEADLINE_ENV: str(self.ack_deadline),
            CREATE_MISSING_ENV: (
                None if self.create_missing is None else str(self.create_missing).lower()
            ),
            FIRESTORE_DATABASE_ENV: self.database,
            FIRESTORE_PREFIX_ENV: self.collection_prefix,
            RUN_RETENTION_ENV: _duration_or_none(self.run_retention),
            ITEM_RETENTION_ENV: _duration_or_none(self.item_retention),
            WIF_PROVIDER_ENV: self.wif_provider,
            SERVICE_ACCOUNT_ENV: self.service_account,
            WIF_AUDIENCE_ENV: self.wif_audience,
            WIF_SOURCE_ENV: None if self.wif_source == "azure" else self.wif_source,
        }
        return {name: value for name, value in values.items() if value}


def _duration_or_none(value: timedelta | None) -> str | None:
    return None if value is None else duration_text(value)
