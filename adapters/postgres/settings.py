"""Every setting of the Postgres provider: environment name, default and bounds, in one place.

=========================================  ===================================================
``CRONWARDEN_POSTGRES_DSN``                 libpq connection string or URI (required; a
                                            credential: redacted wherever it is shown)
``CRONWARDEN_POSTGRES_SCHEMA``              schema holding cronwarden's tables (``cronwarden``)
``CRONWARDEN_POSTGRES_POOL_MIN``            connections kept open per process (1; 0..100)
``CRONWARDEN_POSTGRES_POOL_MAX``            connections at most per process (10; 1..1000)
``CRONWARDEN_POSTGRES_CONNECT_TIMEOUT``     seconds to open a connection (5; 1..300)
``CRONWARDEN_POSTGRES_POOL_TIMEOUT``        seconds to wait for a pooled connection (10; 0.1..600)
``CRONWARDEN_POSTGRES_STATEMENT_TIMEOUT``   seconds one statement may run (30; 1..3600)
``CRONWARDEN_POSTGRES_MAX_DELIVERIES``      deliveries without settlement before the queue
                                            dead-letters a message (10; 1..1000)
``CRONWARDEN_POSTGRES_DEDUP_WINDOW``        seconds a publish ``dedup_id`` is remembered
                                            (600; 1..604800)
``CRONWARDEN_POSTGRES_EXPIRE_EVERY``        seconds between sweeps of expired records
                                            (300; 0 = never, else 1..86400)
``CRONWARDEN_POSTGRES_EXPIRE_BATCH``        rows one sweep deletes at most (1000; 1..100000)
=========================================  ===================================================

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

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.redaction import MASK, redact, redact_url

ENV_PREFIX = "CRONWARDEN_POSTGRES_"
ENV_DSN = ENV_PREFIX + "DSN"
SCHEMA_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")


def _bounded(name: str, low: float, high: float, *, zero_ok: bool = False) -> dict[str, Any]:
    """Field metadata: the environment name suffix and the inclusive bounds."""
    return {"env": ENV_PREFIX + name, "bounds": (low, high), "zero_ok": zero_ok}


@dataclass(frozen=True)
class PostgresSettings:
    """The provider's configuration. Build with :meth:`from_env` (or directly in code).

    ``dsn`` is a credential: it is left out of ``repr`` and shown only through
    :attr:`display_dsn` (password masked).
    """

    dsn: str = field(repr=False, metadata={"env": ENV_DSN})
    schema: str = field(default="cronwarden", metadata={"env": ENV_PREFIX + "SCHEMA"})
    pool_min: int = field(default=1, metadata=_bounded("POOL_MIN", 0, 100))
    pool_max: int = field(default=10, metadata=_bounded("POOL_MAX", 1, 1000))
    connect_timeout: float = field(default=5.0, metadata=_bounded("CONNECT_TIMEOUT", 1, 300))
    pool_timeout: float = field(default=10.0, metadata=_bounded("POOL_TIMEOUT", 0.1, 600))
    statement_timeout: float = field(default=30.0, metadata=_bounded("STATEMENT_TIMEOUT", 1, 3600))
    max_deliveries: int = field(default=10, metadata=_bounded("MAX_DELIVERIES", 1, 1000))
    dedup_window: float = field(default=600.0, metadata=_bounded("DEDUP_WINDOW", 1, 604800))
    expire_every: float = field(
        default=300.0, metadata=_bounded("EXPIRE_EVERY", 1, 86400, zero_ok=True)
    )
    expire_batch: int = field(default=1000, metadata=_bounded("EXPIRE_BATCH", 1, 100000))

    def __post_init__(self) -> None:
        if not self.dsn or not self.dsn.strip():
            raise ConfigurationError(
                f"the Postgres provider needs a DSN: set ${ENV_DSN} or pass --dsn "
                "(e.g. postgresql://cronwarden@db.internal:5432/cronwarden)"
            )
        if not SCHEMA_PATTERN.match(self.schema):
            raise ConfigurationError(
                f"schema {self.schema!r}: use lower-case letters, digits and _ "
                "(at most 48 characters, not starting with a digit)"
            )
        for f in dataclasses.fields(self):
            bounds = f.metadata.get("bounds")
            if bounds is None:
                continue
            value = getattr(self, f.name)
            low, high = bounds
            if f.metadata.get("zero_ok") and value == 0:
                continue
            if not low <= value <= high:
                raise ConfigurationError(
                    f"{f.metadata['env']}={value}: must lie in [{low:g}, {high:g}]"
                    + (" or be 0" if f.metadata.get("zero_ok") else "")
                )
        if self.pool_min > self.pool_max:
            raise ConfigurationError(
                f"pool_min ({self.pool_min}) must not exceed pool_max ({self.pool_max})"
            )
        register_dsn_secrets(self.dsn)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> PostgresSettings:
        """Settings from ``environ`` (default ``os.environ``); non-``None`` keyword overrides
        win (``dsn=...`` from ``--dsn``). Malformed numbers are refused with the variable name."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            name = f.metadata["env"]
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                continue
            kind = f.type if isinstance(f.type, str) else f.type.__name__
            try:
                values[f.name] = {"int": int, "float": float}.get(kind, str)(raw.strip())
            except ValueError:
                raise ConfigurationError(f"{name}={raw!r} is not a valid {kind}") from None
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigurationError(f"unknown Postgres setting(s): {', '.join(sorted(unknown))}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        if "dsn" not in values:
            values["dsn"] = ""
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The environment that :meth:`from_env` reads back into equal settings (includes the
        DSN: treat the result as a secret)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.metadata["env"]] = f"{value:g}" if isinstance(value, float) else str(value)
        return out

    @property
    def display_dsn(self) -> str:
        """The DSN with its password masked, for messages."""
        return redact_dsn(self.dsn)

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Field name -> environment variable, for docs and deployment rendering."""
        return {f.name: f.metadata["env"] for f in dataclasses.fields(cls)}


_KV_PASSWORD = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def redact_dsn(dsn: str) -> str:
    """``dsn`` (URI or key/value form) with the password masked."""
    if "://" not in dsn:
        return redact(_KV_PASSWORD.sub(lambda m: m.group(1) + MASK, dsn))
    return redact_url(dsn)


def register_dsn_secrets(dsn: str) -> None:
    """Register the DSN's password (and the DSN itself) so logs and error snippets mask it."""
    from cronwarden.model.redaction import register_secret

    password = _password_of(dsn)
    if password:
        register_secret(password)
        register_secret(urllib.parse.quote(password, safe=""))
    if password and dsn:
        register_secret(dsn)


def _password_of(dsn: str) -> str | None:
    if "://" in dsn:
        try:
            parts = urllib.parse.urlsplit(dsn)
        except ValueError:
            return None
        if parts.password:
            return urllib.parse.unquote(parts.password)
        for key, value in urllib.parse.parse_qsl(parts.query):
            if key.lower() == "password":
                return value
        return None
    match = _KV_PASSWORD.search(dsn)
    if match is None:
        return None
    value = match.group(2)
    if value.startswith("'") and value.endswith("'"):
        value = value[1:-1].replace("\\'", "'").replace("\\\\", "\\")
    return value
