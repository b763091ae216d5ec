"""Credentials for a process outside Google Cloud reading cronwarden's GCP state: workload
identity federation from an Azure managed identity (the cross-cloud liveness watcher that the
deployment renders; see ``docs/switching-providers.md``).

The Azure token is fetched per refresh from the App Service / Functions identity endpoint
(``IDENTITY_ENDPOINT`` + ``IDENTITY_HEADER``) or, elsewhere on Azure, from the instance metadata
service, exchanged at Google STS for the workload identity ``provider``, then used to
impersonate ``service_account``. Nothing is imported or fetched until the first RPC.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlencode

IMDS_URL = "http://169.254.169.254/metadata/identity/oauth2/token"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def azure_token_source(audience: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The ``credential_source`` of an Azure managed-identity token for ``audience``."""
    endpoint, header = env.get("IDENTITY_ENDPOINT"), env.get("IDENTITY_HEADER")
    if endpoint and header:  # App Service / Azure Functions
        url = f"{endpoint}?{urlencode({'resource': audience, 'api-version': '2019-08-01'})}"
        headers = {"X-IDENTITY-HEADER": header}
    else:  # VMs, containers with IMDS
        url = f"{IMDS_URL}?{urlencode({'resource': audience, 'api-version': '2018-02-01'})}"
        headers = {"Metadata": "true"}
    client_id = env.get("AZURE_CLIENT_ID")
    if client_id:  # a user-assigned identity
        url += "&" + urlencode({"client_id": client_id})
    return {
        "url": url,
        "headers": headers,
        "format": {"type": "json", "subject_token_field_name": "access_token"},
    }


def federation_info(
    provider: str, service_account: str, audience: str, env: Mapping[str, str]
) -> dict[str, Any]:
    """The ``external_account`` configuration google-auth builds credentials from."""
    name = provider.removeprefix("//iam.googleapis.com/")
    return {
        "type": "external_account",
        "audience": f"//iam.googleapis.com/{name}",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": "https://sts.googleapis.com/v1/token",
        "service_account_impersonation_url": (
            "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/"
            f"{service_account}:generateAccessToken"
        ),
        "credential_source": azure_token_source(audience, env),
    }


def federated_credentials(
    provider: str, service_account: str, audience: str, env: Mapping[str, str]
) -> Any:
    """google-auth credentials for the configuration above (no network until refreshed)."""
    from google.auth import identity_pool

    info = federation_info(provider, service_account, audience, env)
    return cast(Any, identity_pool.Credentials).from_info(info, scopes=SCOPES)
