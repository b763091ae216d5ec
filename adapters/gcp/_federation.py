"""Credentials for a process outside Google Cloud reading cronwarden's GCP state: workload
identity federation from an Azure managed identity or an AWS role (the cross-cloud liveness
watcher that the deployment renders; see ``docs/switching-providers.md``, ``docs/deploy-aws.md``).

From AWS (``source="aws"``): google-auth's ``aws.Credentials`` signs an STS
``GetCallerIdentity`` request with the role's credentials, which on Lambda are the environment
variables ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` and the
region ``AWS_REGION`` (no metadata server is asked), and Google STS exchanges it for a token.

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


#: the ``credential_source`` of an AWS workload (``gcloud iam workload-identity-pools
#: create-cred-config --aws`` without the metadata URLs: Lambda has no metadata server, the
#: region and credentials are environment variables)
AWS_TOKEN_SOURCE: dict[str, Any] = {
    "environment_id": "aws1",
    "regional_cred_verification_url": (
        "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"
    ),
}
AWS_SUBJECT_TOKEN_TYPE = "urn:ietf:params:aws:token-type:aws4_request"  # noqa: S105 - a type


def federation_info(
    provider: str,
    service_account: str,
    audience: str,
    env: Mapping[str, str],
    *,
    source: str = "azure",
) -> dict[str, Any]:
    """The ``external_account`` configuration google-auth builds credentials from (the same
    JSON as a credential configuration file: no key in it)."""
    name = provider.removeprefix("//iam.googleapis.com/")
    aws = source == "aws"
    return {
        "type": "external_account",
        "audience": f"//iam.googleapis.com/{name}",
        "subject_token_type": (
            AWS_SUBJECT_TOKEN_TYPE if aws else "urn:ietf:params:oauth:token-type:jwt"
        ),
        "token_url": "https://sts.googleapis.com/v1/token",
        "service_account_impersonation_url": (
            "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/"
            f"{service_account}:generateAccessToken"
        ),
        "credential_source": dict(AWS_TOKEN_SOURCE) if aws else azure_token_source(audience, env),
    }


def federated_credentials(
    provider: str,
    service_account: str,
    audience: str,
    env: Mapping[str, str],
    *,
    source: str = "azure",
) -> Any:
    """google-auth credentials for the configuration above (no network until refreshed)."""
    info = federation_info(provider, service_account, audience, env, source=source)
    if source == "aws":
        from google.auth import aws

        return cast(Any, aws.Credentials).from_info(info, scopes=SCOPES)
    from google.auth import identity_pool

    return cast(Any, identity_pool.Credentials).from_info(info, scopes=SCOPES)
