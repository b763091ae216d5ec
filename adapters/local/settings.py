"""Every setting of the local provider, its environment name and default, in one place."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cronwarden.jobs.config import env_text

PATH_ENV = "CRONWARDEN_LOCAL_PATH"  #: the state database (the queue: ``<path>-queue``)
DEFAULT_PATH = os.path.join(".cronwarden", "state.db")
DEFAULT_MAX_DELIVERIES = 10  #: deliveries before the queue dead-letters (argument only)


@dataclass(frozen=True)
class LocalSettings:
    """Where the SQLite files live."""

    path: str = DEFAULT_PATH

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LocalSettings:
        """Read every setting; a bad value raises :class:`ConfigurationError` naming it."""
        env = os.environ if environ is None else environ
        return cls(path=env_text(env, PATH_ENV, DEFAULT_PATH))

    def to_env(self) -> dict[str, str]:
        """The environment that reads back as these settings."""
        return {PATH_ENV: self.path}
