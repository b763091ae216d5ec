"""Settings of the object-storage providers, read from (and written back to) the environment.

S3 (provider ``s3``: the S3 store with the SQS queue of the AWS provider):

* ``CRONWARDEN_S3_BUCKET``: the bucket holding the job objects [cronwarden]
* ``CRONWARDEN_S3_PREFIX``: a folder inside it for this deployment's objects [none]
* everything else (region, endpoint, SQS queue and dead-letter queue, timeouts, attempts,
  ``CRONWARDEN_AWS_CREATE_MISSING`` for the bucket too) is the AWS provider's own settings
  (:mod:`cronwarden.adapters.aws.settings`).

Credentials are never settings: boto3's default chain provides them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cronwarden.adapters.aws.settings import AwsSettings
from cronwarden.model.errors import ConfigurationError

ENV_S3_BUCKET = "CRONWARDEN_S3_BUCKET"
ENV_S3_PREFIX = "CRONWARDEN_S3_PREFIX"
DEFAULT_BUCKET = "cronwarden"


@dataclass(frozen=True)
class S3Settings:
    """The S3 store's bucket and prefix, and the AWS settings it shares with the SQS queue."""

    bucket: str = DEFAULT_BUCKET
    prefix: str = ""
    aws: AwsSettings = field(default_factory=AwsSettings)

    def __post_init__(self) -> None:
        if not self.bucket:
            raise ConfigurationError(f"${ENV_S3_BUCKET} must name a bucket")

    @property
    def create_missing(self) -> bool:
        return self.aws.create_missing

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> S3Settings:
        """Settings from ``env`` (default ``os.environ``); ``bucket`` and ``prefix`` overrides
        win, other keyword overrides go to the AWS settings."""
        env = os.environ if env is None else env
        bucket = overrides.pop("bucket", None) or env.get(ENV_S3_BUCKET, "").strip()
        prefix = overrides.pop("prefix", None)
        if prefix is None:
            prefix = env.get(ENV_S3_PREFIX, "").strip()
        return cls(bucket or DEFAULT_BUCKET, prefix, AwsSettings.from_env(env, **overrides))

    def to_env(self) -> dict[str, str]:
        """The environment :meth:`from_env` reads back as these settings."""
        env = self.aws.to_env()
        env[ENV_S3_BUCKET] = self.bucket
        if self.prefix:
            env[ENV_S3_PREFIX] = self.prefix
        return env

    def with_(self, **changes: Any) -> S3Settings:
        return replace(self, **changes)


__all__ = ["ENV_S3_BUCKET", "ENV_S3_PREFIX", "S3Settings"]
