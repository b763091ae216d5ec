"""Token credentials for the Azure provider, built lazily from the environment.

* Default: ``DefaultAzureCredential`` (azure-identity), which on Azure Functions / App Service
  uses the app's managed identity (``AZURE_CLIENT_ID`` selects a user-assigned one) and locally
  the developer's ``az login``.
* ``CRONWARDEN_AZURE_FEDERATION=google``: a process on Google Cloud (the cross-cloud watcher the
  deployment renders) signs in to Entra ID as the app registration ``AZURE_CLIENT_ID`` in
  ``AZURE_TENANT_ID`` with a client assertion: a Google-signed ID token for the audience
  ``api://AzureADTokenExchange`` from the metadata server (the app registration's federated
  credential trusts it). No secret is stored anywhere.

azure-identity is imported when a credential is built, not when this module is imported.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from cronwarden.model.errors import ConfigurationError

from .settings import FEDERATION_ENV as ENV_FEDERATION

GOOGLE_IDENTITY_URL = (
    "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/identity"
)
TOKEN_EXCHANGE_AUDIENCE = "api://AzureADTokenExchange"  # noqa: S105 - an audience, not a secret


def google_id_token(audience: str = TOKEN_EXCHANGE_AUDIENCE, *, timeout: float = 10.0) -> str:
    """A Google-signed ID token of this workload's service account (metadata server)."""
    url = f"{GOOGLE_IDENTITY_URL}?{urlencode({'audience': audience, 'format': 'full'})}"
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310 - fixed host
        return bytes(reply.read()).decode().strip()


def credential_from_env(env: Mapping[str, str] | None = None) -> Any:
    """The token credential the environment asks for (see the module docstring)."""
    env = os.environ if env is None else env
    federation = (env.get(ENV_FEDERATION) or "").strip().lower()
    try:
        import azure.identity as identity
    except ImportError as exc:  # pragma: no cover - azure-identity is in the azure extra
        raise ConfigurationError(
            "identity-based Azure access needs azure-identity: pip install 'cronwarden[azure]'"
        ) from exc
    if not federation:
        client_id = env.get("AZURE_CLIENT_ID")
        if client_id:
            return identity.DefaultAzureCredential(managed_identity_client_id=client_id)
        return identity.DefaultAzureCredential()
    if federation != "google":
        raise ConfigurationError(
            f"{ENV_FEDERATION}={federation!r} is not supported; the only federation is 'google'"
        )
    tenant, client = env.get("AZURE_TENANT_ID"), env.get("AZURE_CLIENT_ID")
    if not tenant or not client:
        raise ConfigurationError(
            f"{ENV_FEDERATION}=google needs AZURE_TENANT_ID and AZURE_CLIENT_ID (the app "
            "registration whose federated credential trusts this Google service account)"
        )
    return identity.ClientAssertionCredential(tenant, client, lambda: google_id_token())


__all__ = ["ENV_FEDERATION", "credential_from_env", "google_id_token"]
