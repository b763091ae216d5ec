"""Secrets by reference: the watcher's webhook URL (a credential) is never put into the functions'
environment or Terraform state; the environment names where it lives and the function reads it
with its role on first use.

* ``CRONWARDEN_WEBHOOK_SECRET_ARN``: a Secrets Manager secret (ARN or name) whose string is the URL;
* ``CRONWARDEN_WEBHOOK_SSM_PARAMETER``: an SSM parameter (a ``SecureString``) holding the URL.

``CRONWARDEN_WEBHOOK_URL`` itself still works (local runs). Errors name the reference, never the
value.

Another cloud's credential, for a watcher on AWS watching jobs elsewhere
(:func:`load_secret_environment`): ``CRONWARDEN_AWS_SECRET_ENVIRONMENT`` is a JSON object
``{"<ENV NAME>": "<secret ARN or name>"}`` (rendered from the ARNs a user gives; the values were
stored outside Terraform). At cold start each secret's string becomes that environment variable
of the process, where the other cloud's SDK reads it (``AZURE_CLIENT_SECRET`` for
azure-identity's ``EnvironmentCredential``), as the secret environment of a Cloud Function or a
Key Vault reference of an Azure app would. Nothing else is written; no value is logged.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, MutableMapping

from cronwarden.model.errors import ConfigurationError

from ._clients import client
from .settings import AwsSettings

SECRET_ENV = "CRONWARDEN_WEBHOOK_SECRET_ARN"  # noqa: S105 - an environment name
PARAMETER_ENV = "CRONWARDEN_WEBHOOK_SSM_PARAMETER"
SECRET_ENVIRONMENT_ENV = "CRONWARDEN_AWS_SECRET_ENVIRONMENT"  # noqa: S105 - an environment name
_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


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


def secret_references(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{environment name: secret ARN or name}`` from :data:`SECRET_ENVIRONMENT_ENV` (empty
    when unset); :class:`ConfigurationError` when it is not such an object."""
    env = os.environ if env is None else env
    text = env.get(SECRET_ENVIRONMENT_ENV, "").strip()
    if not text:
        return {}
    try:
        references = json.loads(text)
    except ValueError:
        references = None
    if not isinstance(references, dict) or not all(
        isinstance(k, str) and _NAME.match(k) and isinstance(v, str) and v.strip()
        for k, v in references.items()
    ):
        raise ConfigurationError(
            f"{SECRET_ENVIRONMENT_ENV} must be a JSON object of environment names (A-Z, 0-9, _) "
            "to Secrets Manager secret ARNs"
        )
    return {name: ref.strip() for name, ref in references.items()}


def load_secret_environment(env: MutableMapping[str, str] | None = None) -> tuple[str, ...]:
    """Read every secret :data:`SECRET_ENVIRONMENT_ENV` names and set it in ``env`` (default
    ``os.environ``); returns the names set. Raises :class:`ConfigurationError` naming the
    variable and the secret (never its value) when one cannot be read or is empty: the
    watcher then fails loudly instead of watching nothing."""
    target: MutableMapping[str, str] = os.environ if env is None else env
    references = secret_references(target)
    if not references:
        return ()
    sm = client("secretsmanager", AwsSettings.from_env(target))
    values: dict[str, str] = {}
    for name, reference in references.items():
        try:
            value = sm.get_secret_value(SecretId=reference).get("SecretString")
        except Exception as exc:
            raise ConfigurationError(
                f"cannot read {name} from secret {reference} ({type(exc).__name__})"
            ) from None
        if not isinstance(value, str) or not value.strip():
            raise ConfigurationError(f"secret {reference} (for {name}) holds no text")
        values[name] = value.strip()
    target.update(values)  # all or nothing
    return tuple(values)


__all__ = [
    "PARAMETER_ENV",
    "SECRET_ENV",
    "SECRET_ENVIRONMENT_ENV",
    "load_secret_environment",
    "secret_references",
    "webhook_url",
]
