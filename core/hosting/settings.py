"""The cloud-neutral host settings: which provider, which jobs, where alerts go, which functions.

Every host (``cronwarden run``, the pull workers, the GCP functions, the Azure app) reads these
through :class:`HostSettings`, so every host gets the same notifiers from the same settings.
The environment names are the constants below (the ones every layer reads come from
:mod:`cronwarden.model.environment`); nothing else spells them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..model.environment import DEFAULT_PROVIDER as DEFAULT_PROVIDER
from ..model.environment import JOBS_ENV as JOBS_ENV
from ..model.environment import PROVIDER_ENV as PROVIDER_ENV
from ..model.environment import WEBHOOK_ENV as WEBHOOK_ENV
from ..model.errors import ConfigurationError

FUNCTIONS_ENV = "CRONWARDEN_FUNCTIONS"  #: comma list of the functions an app answers
FUNCTION_NAMES = ("trigger", "worker", "watcher")


@dataclass(frozen=True)
class HostSettings:
    """What every host reads besides its cloud's own settings.

    ``provider``: ``$CRONWARDEN_PROVIDER`` (``local``); ``jobs``: ``$CRONWARDEN_JOBS`` (empty:
    the host is given its jobs); ``webhook_url``: ``$CRONWARDEN_WEBHOOK_URL`` (empty: alerts go
    to the log only; a secret, never shown by ``repr``); ``functions``: ``$CRONWARDEN_FUNCTIONS``
    (the functions a serverless app answers; all when empty).
    """

    provider: str = DEFAULT_PROVIDER
    jobs: str = ""
    webhook_url: str = ""
    functions: frozenset[str] = frozenset(FUNCTION_NAMES)

    def __repr__(self) -> str:  # the webhook URL is a credential
        hook = "set" if self.webhook_url else "unset"
        return (
            f"HostSettings(provider={self.provider!r}, jobs={self.jobs!r}, webhook_url={hook}, "
            f"functions={sorted(self.functions)!r})"
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HostSettings:
        """Read the settings; a bad value raises :class:`ConfigurationError` naming the
        variable (never its value when it is a secret)."""
        env = os.environ if environ is None else environ
        provider = (env.get(PROVIDER_ENV) or DEFAULT_PROVIDER).strip().lower()
        url = (env.get(WEBHOOK_ENV) or "").strip()
        if url and not url.startswith(("https://", "http://")):
            raise ConfigurationError(f"${WEBHOOK_ENV} must start with https:// or http://")
        return cls(
            provider=provider,
            jobs=(env.get(JOBS_ENV) or "").strip(),
            webhook_url=url,
            functions=frozenset(_functions(env.get(FUNCTIONS_ENV, ""))),
        )

    def to_env(self) -> dict[str, str]:
        """The environment that reads back as these settings (empty values left out)."""
        env = {PROVIDER_ENV: self.provider}
        if self.jobs:
            env[JOBS_ENV] = self.jobs
        if self.webhook_url:
            env[WEBHOOK_ENV] = self.webhook_url
        if self.functions != frozenset(FUNCTION_NAMES):
            env[FUNCTIONS_ENV] = ",".join(n for n in FUNCTION_NAMES if n in self.functions)
        return env


def _functions(raw: str) -> set[str]:
    chosen = {part.strip().lower() for part in raw.split(",") if part.strip()}
    unknown = chosen - set(FUNCTION_NAMES)
    if unknown:
        raise ConfigurationError(
            f"${FUNCTIONS_ENV}: unknown function(s) {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(FUNCTION_NAMES)}"
        )
    return chosen or set(FUNCTION_NAMES)


def enabled_functions(env: Mapping[str, str] | None = None) -> set[str]:
    """The functions ``$CRONWARDEN_FUNCTIONS`` enables (all when unset); unknown names refused."""
    return _functions((os.environ if env is None else env).get(FUNCTIONS_ENV, ""))
