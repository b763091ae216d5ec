"""Every setting of the Azure provider and function app, its environment name, default and
bounds, in one place.

The provider, the function app (:mod:`.functions`), the local Functions host, the test hosts
and the bench read it; renderers write it with :meth:`AzureSettings.to_env`. The ``*_ENV``
constants are the only spelling of each environment name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from cronwarden.jobs.config import env_int, env_text

STORAGE_CONNECTION_ENV = "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING"  #: a secret
STORAGE_CONNECTION_FALLBACK_ENV = "AZURE_STORAGE_CONNECTION_STRING"  #: the SDK's own name
TABLE_ACCOUNT_URL_ENV = "CRONWARDEN_AZURE_TABLE_ACCOUNT_URL"
TABLE_ENV = "CRONWARDEN_AZURE_TABLE"
SERVICEBUS_CONNECTION_ENV = "CRONWARDEN_SERVICEBUS_CONNECTION"  #: a secret
SERVICEBUS_NAMESPACE_ENV = "CRONWARDEN_SERVICEBUS_NAMESPACE"
#: the run-request queue: what the provider sends to and the worker function's trigger binds to
QUEUE_ENV = "CRONWARDEN_SERVICEBUS_QUEUE"
MAX_DELIVERIES_ENV = "CRONWARDEN_SERVICEBUS_MAX_DELIVERIES"
FEDERATION_ENV = "CRONWARDEN_AZURE_FEDERATION"  #: ``google``: sign in with a Google ID token
WATCHER_SCHEDULE_ENV = "CRONWARDEN_WATCHER_SCHEDULE"
SCHEDULE_ENV_PREFIX = "CRONWARDEN_SCHEDULE_"  #: + the job name, upper case, ``-`` → ``_``
#: the app setting the worker's Service Bus binding names (``<name>`` = connection string, or
#: ``<name>__fullyQualifiedNamespace`` with the app's identity)
SERVICEBUS_BINDING_CONNECTION = "ServiceBusConnection"

DEFAULT_TABLE = "cronwarden"
DEFAULT_QUEUE = "cronwarden-runs"
DEFAULT_MAX_DELIVERIES = 10
DEFAULT_WATCHER_SCHEDULE = "0 */5 * * * *"


def schedule_setting(job_name: str) -> str:
    """``CRONWARDEN_SCHEDULE_<JOB_NAME_UPPER_UNDERSCORED>``: a job's timer override (NCRONTAB)."""
    return SCHEDULE_ENV_PREFIX + job_name.upper().replace("-", "_")


@dataclass(frozen=True)
class AzureSettings:
    """The Azure provider's and function app's configuration (names: the module constants).

    The connection strings are secrets: ``repr`` never shows them, errors never quote them.
    """

    storage_connection_string: str = field(default="", repr=False)
    table_account_url: str = ""
    table: str = DEFAULT_TABLE
    servicebus_connection: str = field(default="", repr=False)
    servicebus_namespace: str = ""
    queue: str = DEFAULT_QUEUE
    max_deliveries: int = DEFAULT_MAX_DELIVERIES
    federation: str = ""
    watcher_schedule: str = DEFAULT_WATCHER_SCHEDULE
    schedules: Mapping[str, str] = field(default_factory=dict)  #: setting name → NCRONTAB

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AzureSettings:
        """Read every setting; a bad value raises :class:`ConfigurationError` naming it."""
        env = os.environ if environ is None else environ
        return cls(
            storage_connection_string=env_text(env, STORAGE_CONNECTION_ENV)
            or env_text(env, STORAGE_CONNECTION_FALLBACK_ENV),
            table_account_url=env_text(env, TABLE_ACCOUNT_URL_ENV),
            table=env_text(env, TABLE_ENV, DEFAULT_TABLE),
            servicebus_connection=env_text(env, SERVICEBUS_CONNECTION_ENV),
            servicebus_namespace=env_text(env, SERVICEBUS_NAMESPACE_ENV),
            queue=env_text(env, QUEUE_ENV, DEFAULT_QUEUE),
            max_deliveries=env_int(env, MAX_DELIVERIES_ENV, DEFAULT_MAX_DELIVERIES, low=1),
            federation=env_text(env, FEDERATION_ENV).lower(),
            watcher_schedule=env_text(env, WATCHER_SCHEDULE_ENV, DEFAULT_WATCHER_SCHEDULE),
            schedules={
                name: value.strip()
                for name, value in env.items()
                if name.startswith(SCHEDULE_ENV_PREFIX) and value.strip()
            },
        )

    def schedule_for(self, job_name: str) -> str | None:
        """The job's timer override, if set."""
        return self.schedules.get(schedule_setting(job_name))

    def to_env(self) -> dict[str, str]:
        """The environment that reads back as these settings (unset values left out)."""
        values = {
            STORAGE_CONNECTION_ENV: self.storage_connection_string,
            TABLE_ACCOUNT_URL_ENV: self.table_account_url,
            TABLE_ENV: self.table,
            SERVICEBUS_CONNECTION_ENV: self.servicebus_connection,
            SERVICEBUS_NAMESPACE_ENV: self.servicebus_namespace,
            QUEUE_ENV: self.queue,
            MAX_DELIVERIES_ENV: str(self.max_deliveries),
            FEDERATION_ENV: self.federation,
            WATCHER_SCHEDULE_ENV: self.watcher_schedule,
            **self.schedules,
        }
        return {name: value for name, value in values.items() if value}
