"""Settings read from the environment: the names every host reads, and the readers every
settings object (the providers', the hosts', alerting's) shares.

The environment names are the constants below; nothing else spells them
(:mod:`cronwarden.hosting.settings` re-exports them for the hosts).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from .durations import parse_duration
from .errors import ConfigurationError

PROVIDER_ENV = "CRONWARDEN_PROVIDER"  #: local | gcp | azure | aws | postgres
JOBS_ENV = "CRONWARDEN_JOBS"  #: the job module (dotted name or .py path)
WEBHOOK_ENV = "CRONWARDEN_WEBHOOK_URL"  #: the watcher's webhook (a credential: never logged)
DEFAULT_PROVIDER = "local"


def env_text(env: Mapping[str, str], name: str, default: str = "") -> str:
    """``env[name]`` stripped, or ``default`` when unset or empty."""
    return (env.get(name) or "").strip() or default


def env_int(
    env: Mapping[str, str],
    name: str,
    default: int,
    *,
    low: int | None = None,
    high: int | None = None,
) -> int:
    """An integer setting within ``[low, high]``; a bad value raises
    :class:`ConfigurationError` naming the variable."""
    raw = env_text(env, name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{low} to {high}" if low is not None and high is not None else f">= {low}"
        raise ConfigurationError(f"{name} must be {bounds}, got {value}")
    return value


def env_flag(env: Mapping[str, str], name: str) -> bool | None:
    """A yes/no setting (1/true/yes/on vs anything else); ``None`` when unset."""
    raw = env.get(name)
    if raw is None:
        return None
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def env_duration(env: Mapping[str, str], name: str) -> timedelta | None:
    """A duration setting (``90d``, ``1h30m``); ``None`` when unset."""
    raw = env_text(env, name)
    if not raw:
        return None
    try:
        return parse_duration(raw, field=name)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def duration_text(value: timedelta) -> str:
    """A duration as :func:`env_duration` reads it back (whole seconds: ``"3600s"``)."""
    return f"{int(value.total_seconds())}s"
