"""Secrets by reference: the watcher's webhook URL (a credential) is never put into the functions'
environment or Terraform state; the environment names where it lives and the function reads it
with its role on first use.

* ``CRONWARDEN_WEBHOOK_SECRET_ARN``: a Secrets Manager secret (ARN or name) whose string is the URL;
* ``CRONWARDEN_WEBHOOK_SSM_PARAMETER``: an SSM parameter (a ``SecureString``) holding the URL.

``CRONWARDEN_WEBHOOK_URL`` itself still works (local runs). Errors name the reference, never the
value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cronwarden.errors import ConfigurationError

from ._clients import client
from .settings import AwsSettings

SECRET_ENV = "CRONWARDEN_WEBHOOK_SECRET_ARN"  # noqa: S105 - an environment name
PARAMETER_ENV = "CRONWARDEN_WEBHOOK_SSM_PARAMETER"


def webhook_url(env: Mapping[str, str] | None = None) -> str | None:
    """The webhook URL the references in ``env`` (default ``os.environ``) point to, or None
    when there is no reference."""
    env = os.environ if env is None else env
    secret, parameter = env.get(SECRET_ENV, "").strip(), env.get(PARAMETER_ENV, "").strip()
    if not secret and not parameter:
        return None
    settings = AwsSettings.from_env(env)
    try:
        if secret:
            sm = client("secretsmanager", settings)
            value = sm.get_secret_value(SecretId=secret).get("SecretString")
        else:
            ssm = client("ssm", settings)
            value = ssm.get_parameter(Name=parameter, WithDecryption=True)["Parameter"]["Value"]
    except Exception as exc:
        where = f"secret {secret}" if secret else f"parameter {parameter}"
        raise ConfigurationError(
            f"cannot read the webhook URL from {where} ({type(exc).__name__})"
        ) from None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError("the webhook URL reference holds no text")
    return value.strip()


__all__ = ["PARAMETER_ENV", "SECRET_ENV", "webhook_url"]
