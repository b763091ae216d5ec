"""The ``s3`` provider: the object store on S3 (:class:`~.store.ObjectStore` over
:class:`~.s3.S3Objects`) with the AWS provider's SQS queue and EventBridge schedule checks,
configured by :class:`~.settings.S3Settings` (environment names there)."""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

from cronwarden.adapters.aws.provider import AwsProvider
from cronwarden.adapters.aws.queue import SqsQueue
from cronwarden.jobs.definitions import Job
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Provider

from .settings import S3Settings
from .store import ObjectStore


class S3Provider(Provider):
    """State in one S3 object per job; run requests on SQS and schedules on EventBridge as the
    ``aws`` provider has them (its DynamoDB table is never used). Built on first use; the store
    first checks that the endpoint honours conditional writes
    (:func:`~.objects.verify_preconditions`, five requests once per process)."""

    name = "s3"

    def __init__(self, settings: S3Settings | None = None) -> None:
        self.settings = settings or S3Settings()
        self._aws = AwsProvider(self.settings.aws)
        self._lock = threading.Lock()
        self._store: ObjectStore | None = None

    @classmethod
    def from_env(cls, **overrides: Any) -> S3Provider:
        """The provider configured from the environment (keyword ``overrides`` win)."""
        if importlib.util.find_spec("boto3") is None:
            raise ConfigurationError("the S3 provider needs boto3: pip install 'cronwarden[aws]'")
        return cls(S3Settings.from_env(**overrides))

    def store(self) -> ObjectStore:
        from .objects import verify_preconditions
        from .s3 import S3Objects

        with self._lock:
            if self._store is None:
                objects = S3Objects.from_settings(self.settings)
                try:
                    # an endpoint that ignores If-None-Match / If-Match must stop us here,
                    # not let two owners claim one run later
                    verify_preconditions(objects, self.settings.prefix)
                except BaseException:
                    objects.close()
                    raise
                self._store = ObjectStore(objects, self.settings.prefix)
            return self._store

    def queue(self) -> SqsQueue:
        return self._aws.queue()

    def schedule_state(self, job: Job) -> tuple[bool | None, str]:
        """For ``cronwarden doctor``: the job's EventBridge schedule, as the ``aws`` provider
        checks it (``CRONWARDEN_AWS_SCHEDULE_GROUP``)."""
        return self._aws.schedule_state(job)

    def close(self) -> None:
        self._aws.close()
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def __repr__(self) -> str:
        s = self.settings
        return f"S3Provider(bucket={s.bucket!r}, prefix={s.prefix!r}, queue={s.aws.queue!r})"


__all__ = ["S3Provider"]
