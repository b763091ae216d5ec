"""Every setting of the AWS provider, in one frozen value read from (and written back to) the
environment.

Environment names (default in brackets):

* ``CRONWARDEN_AWS_REGION``: region, then ``AWS_REGION``, ``AWS_DEFAULT_REGION`` [us-east-1]
* ``CRONWARDEN_AWS_ENDPOINT_URL``: one endpoint for every service (moto, local stacks), then
  ``AWS_ENDPOINT_URL`` [unset: AWS]
* ``CRONWARDEN_DYNAMODB_TABLE``: the state table [cronwarden]
* ``CRONWARDEN_SQS_QUEUE`` / ``CRONWARDEN_SQS_QUEUE_URL``: the run request queue [cronwarden-runs]
  (the URL saves a ``GetQueueUrl`` call)
* ``CRONWARDEN_SQS_DEAD_LETTER_QUEUE`` / ``..._URL``: its dead-letter queue [<queue>-dlq]
* ``CRONWARDEN_SQS_MAX_RECEIVE_COUNT``: the redrive policy's ``maxReceiveCount`` [10]
* ``CRONWARDEN_AWS_CREATE_MISSING``: create table and queues when absent, locally [false]
* ``CRONWARDEN_AWS_CONNECT_TIMEOUT`` / ``CRONWARDEN_AWS_READ_TIMEOUT``: seconds [5 / 30]
  (SQS long polls add their wait to the read timeout)
* ``CRONWARDEN_AWS_MAX_ATTEMPTS``: botocore attempts per call, standard retry mode [4]
* ``CRONWARDEN_AWS_SCHEDULE_GROUP`` / ``CRONWARDEN_AWS_SCHEDULE_PREFIX``: the EventBridge
  Scheduler group holding the jobs' schedules and their names' prefix (``<prefix>-<job>``), for
  ``cronwarden doctor`` [unset: schedules not checked; the prefix defaults to the group, as the
  rendered deployment names them]

Credentials are never settings: boto3's default chain (environment, profile, the Lambda or ECS
role, instance metadata) provides them, so nothing secret is read, stored or logged here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from cronwarden.model.errors import ConfigurationError

ENV_REGION = "CRONWARDEN_AWS_REGION"
ENV_ENDPOINT_URL = "CRONWARDEN_AWS_ENDPOINT_URL"
ENV_TABLE = "CRONWARDEN_DYNAMODB_TABLE"
ENV_QUEUE = "CRONWARDEN_SQS_QUEUE"
ENV_QUEUE_URL = "CRONWARDEN_SQS_QUEUE_URL"
ENV_DEAD_LETTER_QUEUE = "CRONWARDEN_SQS_DEAD_LETTER_QUEUE"
ENV_DEAD_LETTER_QUEUE_URL = "CRONWARDEN_SQS_DEAD_LETTER_QUEUE_URL"
ENV_MAX_RECEIVE_COUNT = "CRONWARDEN_SQS_MAX_RECEIVE_COUNT"
ENV_CREATE_MISSING = "CRONWARDEN_AWS_CREATE_MISSING"
ENV_SCHEDULE_GROUP = "CRONWARDEN_AWS_SCHEDULE_GROUP"
ENV_SCHEDULE_PREFIX = "CRONWARDEN_AWS_SCHEDULE_PREFIX"
ENV_CONNECT_TIMEOUT = "CRONWARDEN_AWS_CONNECT_TIMEOUT"
ENV_READ_TIMEOUT = "CRONWARDEN_AWS_READ_TIMEOUT"
ENV_MAX_ATTEMPTS = "CRONWARDEN_AWS_MAX_ATTEMPTS"

DEFAULT_REGION = "us-east-1"
DEFAULT_TABLE = "cronwarden"
DEFAULT_QUEUE = "cronwarden-runs"
DEFAULT_MAX_RECEIVE_COUNT = 10
MAX_RECEIVE_COUNT_LIMIT = 1000  #: SQS accepts 1..1000

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class AwsSettings:
    """The AWS provider's configuration (see the module docstring for the environment names).

    ``from_env`` and ``to_env`` are inverses for every field: a deployment renders ``to_env()``
    into the Lambda functions' environment and the functions read it back with ``from_env()``.
    """

    region: str = DEFAULT_REGION
    endpoint_url: str | None = None
    table: str = DEFAULT_TABLE
    queue: str = DEFAULT_QUEUE
    queue_url: str | None = None
    dead_letter_queue: str | None = None  #: ``None``: ``<queue>-dlq``
    dead_letter_queue_url: str | None = None
    max_receive_count: int = DEFAULT_MAX_RECEIVE_COUNT
    create_missing: bool = False
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    max_attempts: int = 4
    schedule_group: str | None = None
    schedule_prefix: str | None = None  #: ``None``: the group's name

    def __post_init__(self) -> None:
        if not 1 <= self.max_receive_count <= MAX_RECEIVE_COUNT_LIMIT:
            raise ConfigurationError(
                f"${ENV_MAX_RECEIVE_COUNT} must be 1..{MAX_RECEIVE_COUNT_LIMIT} (SQS redrive "
                f"policy), got {self.max_receive_count}"
            )
        if self.max_attempts < 1:
            raise ConfigurationError(f"${ENV_MAX_ATTEMPTS} must be at least 1")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ConfigurationError("AWS timeouts must be positive")
        if not self.table or not self.queue:
            raise ConfigurationError("the DynamoDB table and the SQS queue need names")

    @property
    def dead_letter_queue_name(self) -> str:
        return self.dead_letter_queue or f"{self.queue}-dlq"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> AwsSettings:
        """Settings from ``env`` (default ``os.environ``); keyword ``overrides`` win."""
        env = os.environ if env is None else env

        def text(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        def number(name: str, default: float, kind: type[int] | type[float]) -> Any:
            raw = text(name)
            if raw is None:
                return default
            try:
                return kind(raw)
            except ValueError:
                raise ConfigurationError(f"${name} must be a number, got {raw!r}") from None

        raw_create = (text(ENV_CREATE_MISSING) or "").lower()
        if raw_create not in _TRUE | _FALSE:
            raise ConfigurationError(f"${ENV_CREATE_MISSING} must be true or false")
        values: dict[str, Any] = {
            "region": text(ENV_REGION)
            or text("AWS_REGION")
            or text("AWS_DEFAULT_REGION")
            or DEFAULT_REGION,
            "endpoint_url": text(ENV_ENDPOINT_URL) or text("AWS_ENDPOINT_URL"),
            "table": text(ENV_TABLE) or DEFAULT_TABLE,
            "queue": text(ENV_QUEUE) or DEFAULT_QUEUE,
            "queue_url": text(ENV_QUEUE_URL),
            "dead_letter_queue": text(ENV_DEAD_LETTER_QUEUE),
            "dead_letter_queue_url": text(ENV_DEAD_LETTER_QUEUE_URL),
            "max_receive_count": number(ENV_MAX_RECEIVE_COUNT, DEFAULT_MAX_RECEIVE_COUNT, int),
            "create_missing": raw_create in _TRUE,
            "connect_timeout": number(ENV_CONNECT_TIMEOUT, 5.0, float),
            "read_timeout": number(ENV_READ_TIMEOUT, 30.0, float),
            "max_attempts": number(ENV_MAX_ATTEMPTS, 4, int),
            "schedule_group": text(ENV_SCHEDULE_GROUP),
            "schedule_prefix": text(ENV_SCHEDULE_PREFIX),
        }
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise ConfigurationError(f"unknown AWS setting(s): {', '.join(sorted(unknown))}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The environment that :meth:`from_env` reads back as these settings (unset optional
        fields are left out)."""
        env = {
            ENV_REGION: self.region,
            ENV_TABLE: self.table,
            ENV_QUEUE: self.queue,
            ENV_MAX_RECEIVE_COUNT: str(self.max_receive_count),
            ENV_CREATE_MISSING: "true" if self.create_missing else "false",
            ENV_CONNECT_TIMEOUT: _num(self.connect_timeout),
            ENV_READ_TIMEOUT: _num(self.read_timeout),
            ENV_MAX_ATTEMPTS: str(self.max_attempts),
        }
        optional = {
            ENV_ENDPOINT_URL: self.endpoint_url,
            ENV_QUEUE_URL: self.queue_url,
            ENV_DEAD_LETTER_QUEUE: self.dead_letter_queue,
            ENV_DEAD_LETTER_QUEUE_URL: self.dead_letter_queue_url,
            ENV_SCHEDULE_GROUP: self.schedule_group,
            ENV_SCHEDULE_PREFIX: self.schedule_prefix,
        }
        env.update({k: v for k, v in optional.items() if v})
        return env

    def with_(self, **changes: Any) -> AwsSettings:
        return replace(self, **changes)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


__all__ = ["AwsSettings"]
