"""Secrets by reference: ``env:NAME`` reads an environment variable, ``file:/path`` a file
(a mounted secret, e.g. Secret Manager or Key Vault volumes). Every resolved value is registered
with :func:`cronwarden.model.redaction.register_secret`, so it is masked in every log line, alert
and
error snippet from then on."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ...model.errors import ConfigurationError
from ...model.redaction import register_secret

ENV_PREFIX = "env:"
FILE_PREFIX = "file:"


def is_reference(value: str) -> bool:
    return value.startswith((ENV_PREFIX, FILE_PREFIX))


def resolve_secret(
    value: object,
    field: str,
    *,
    inline_ok: bool = False,
    env: Mapping[str, str] | None = None,
) -> str:
    """The secret ``value`` refers to. ``field`` names the setting in errors (never the value).

    A value that is not a reference is refused unless ``inline_ok`` (webhook URLs, which some
    platforms inject as plain environment values); it is registered for redaction either way.
    """
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{field} is not set: expected env:NAME, file:/path or a value")
    environ = os.environ if env is None else env
    if value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX) :]
        resolved = environ.get(name)
        if not resolved:
            raise ConfigurationError(
                f"{field} (env:{name}): the environment variable is not set or empty"
            )
    elif value.startswith(FILE_PREFIX):
        path = Path(value[len(FILE_PREFIX) :]).expanduser()
        try:
            resolved = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigurationError(
                f"{field} (file:{path}): cannot read it: {exc.strerror}"
            ) from None
        if not resolved:
            raise ConfigurationError(f"{field} (file:{path}): the file is empty")
    elif inline_ok:
        resolved = value
    else:
        raise ConfigurationError(
            f"{field} is given inline: give the secret by reference (env:NAME or file:/path)"
        )
    register_secret(resolved)
    return resolved
