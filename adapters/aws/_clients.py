"""boto3 clients built from :class:`~.settings.AwsSettings` (imported lazily: ``import
cronwarden`` never loads boto3). Credentials come from boto3's default chain."""

from __future__ import annotations

from typing import Any

from .settings import AwsSettings


def client(service: str, settings: AwsSettings, *, read_timeout: float | None = None) -> Any:
    """A ``service`` client with the settings' region, endpoint, timeouts and retry budget.

    botocore's *standard* retry mode retries throttling, 5xx and connection errors with
    jittered backoff; every write this package sends is idempotent under such a resend
    (``TransactWriteItems`` carries an idempotency token that botocore fills in and keeps
    across its retries).
    """
    import boto3
    from botocore.config import Config

    config = Config(
        region_name=settings.region,
        connect_timeout=settings.connect_timeout,
        read_timeout=read_timeout or settings.read_timeout,
        retries={"mode": "standard", "max_attempts": settings.max_attempts},
    )
    session = boto3.session.Session(region_name=settings.region)
    return session.client(service, endpoint_url=settings.endpoint_url, config=config)


__all__ = ["client"]
