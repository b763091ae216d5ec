"""Every setting of the Redis provider: environment name, default and bounds, in one place.

=====================================  ===========================================================
``CRONWARDEN_REDIS_URL``               ``redis://``, ``rediss://`` (TLS) or ``unix://`` URL
                                       (required; a credential when it holds a password: redacted
                                       wherever it is shown)
``CRONWARDEN_REDIS_CLUSTER``           ``true``: the URL names one node of a Redis Cluster (false)
``CRONWARDEN_REDIS_PREFIX``            prefix of every key (``cronwarden``; letters, digits, ``_``
                                       ``-`` ``.``)
``CRONWARDEN_REDIS_QUEUE``             name of the run queue (``runs``)
``CRONWARDEN_REDIS_TIMEOUT``           seconds to connect and to wait for one reply (10; 0.1..300)
``CRONWARDEN_REDIS_MAX_DELIVERIES``    deliveries without settlement before the queue
                                       dead-letters a message (10; 1..1000)
``CRONWARDEN_REDIS_DEDUP_WINDOW``      seconds a publish ``dedup_id`` is remembered (600; 1..604800)
``CRONWARDEN_REDIS_WAIT_REPLICAS``     replicas every commit waits for (``WAIT``) before it counts
                                       as done (0: none; 0..10). See docs/redis.md
``CRONWARDEN_REDIS_WAIT_TIMEOUT``      seconds ``WAIT`` waits (1; 0.01..60)
``CRONWARDEN_REDIS_MIN_RETENTION``     seconds a record is kept at least after a write, whatever
                                       its ``expire_at`` (86400; 1..2592000)
=====================================  ===========================================================

This module imports nothing but the standard library and the core: reading settings never loads
the driver.
"""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cronwarden.model.environment import env_flag
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.redaction import redact_url as redact_url
from cronwarden.model.redaction import register_secret

ENV_PREFIX = "CRONWARDEN_REDIS_"
ENV_URL = ENV_PREFIX + "URL"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_SCHEMES = ("redis", "rediss", "unix")


def _bounded(name: str, low: float, high: float) -> dict[str, Any]:
    return {"env": ENV_PREFIX + name, "bounds": (low, high)}


@dataclass(frozen=True)
class RedisSettings:
    """The provider's configuration. Build with :meth:`from_env` (or directly in code).

    ``url`` is a credential: it is left out of ``repr`` and shown only through
    :attr:`display_url` (password masked); its password is registered for redaction.
    """

    url: str = field(repr=False, metadata={"env": ENV_URL})
    cluster: bool = field(default=False, metadata={"env": ENV_PREFIX + "CLUSTER"})
    prefix: str = field(default="cronwarden", metadata={"env": ENV_PREFIX + "PREFIX"})
    queue: str = field(default="runs", metadata={"env": ENV_PREFIX + "QUEUE"})
    timeout: float = field(default=10.0, metadata=_bounded("TIMEOUT", 0.1, 300))
    max_deliveries: int = field(default=10, metadata=_bounded("MAX_DELIVERIES", 1, 1000))
    dedup_window: float = field(default=600.0, metadata=_bounded("DEDUP_WINDOW", 1, 604800))
    wait_replicas: int = field(default=0, metadata=_bounded("WAIT_REPLICAS", 0, 10))
    wait_timeout: float = field(default=1.0, metadata=_bounded("WAIT_TIMEOUT", 0.01, 60))
    min_retention: float = field(default=86400.0, metadata=_bounded("MIN_RETENTION", 1, 30 * 86400))

    def __post_init__(self) -> None:
        if not self.url or not self.url.strip():
            raise ConfigurationError(
                f"the Redis provider needs a URL: set ${ENV_URL} "
                "(e.g. redis://redis.internal:6379/0, rediss:// for TLS)"
            )
        register_url_secrets(self.url)
        scheme = self.url.split("://", 1)[0].lower() if "://" in self.url else ""
        if scheme not in _SCHEMES:
            raise ConfigurationError(
                f"{ENV_URL}={self.display_url}: use a redis://, rediss:// or unix:// URL"
            )
        for name in ("prefix", "queue"):
            value = getattr(self, name)
            if not NAME_PATTERN.match(value):
                raise ConfigurationError(
                    f"{ENV_PREFIX}{name.upper()}={value!r}: use letters, digits, _ - . "
                    "(1 to 64 characters)"
                )
        for f in dataclasses.fields(self):
            bounds = f.metadata.get("bounds")
            if bounds is None:
                continue
            value = getattr(self, f.name)
            low, high = bounds
            if not low <= value <= high:
                raise ConfigurationError(
                    f"{f.metadata['env']}={value}: must lie in [{low:g}, {high:g}]"
                )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> RedisSettings:
        """Settings from ``environ`` (default ``os.environ``); non-``None`` keyword overrides
        win. Malformed values are refused with the variable's name."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            name = f.metadata["env"]
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                continue
            kind = f.type if isinstance(f.type, str) else f.type.__name__
            if kind == "bool":
                values[f.name] = env_flag(env, name)
                continue
            try:
                values[f.name] = {"int": int, "float": float}.get(kind, str)(raw.strip())
            except ValueError:
                raise ConfigurationError(f"{name}={raw!r} is not a valid {kind}") from None
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigurationError(f"unknown Redis setting(s): {', '.join(sorted(unknown))}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        values.setdefault("url", "")
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The environment that :meth:`from_env` reads back into equal settings (includes the
        URL: treat the result as a secret)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                out[f.metadata["env"]] = "true" if value else "false"
            else:
                out[f.metadata["env"]] = f"{value:g}" if isinstance(value, float) else str(value)
        return out

    @property
    def display_url(self) -> str:
        """The URL with its password masked, for messages."""
        return redact_url(self.url)


def register_url_secrets(url: str) -> None:
    """Register the URL's password (and the URL itself) so logs and error snippets mask it."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return
    password = parts.password
    if password is None:
        for key, value in urllib.parse.parse_qsl(parts.query):
            if key.lower() == "password":
                password = value
    if password:
        register_secret(urllib.parse.unquote(password))
        register_secret(password)
        register_secret(url)
