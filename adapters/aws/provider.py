"""The AWS provider: DynamoDB store and SQS queue, configured by :class:`~.settings.AwsSettings`
(environment names in :mod:`.settings`). Credentials come from boto3's default chain."""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

from cronwarden.errors import ConfigurationError
from cronwarden.ports import Provider

from .queue import SqsQueue
from .settings import AwsSettings
from .store import DynamoStore


class AwsProvider(Provider):
    """State in DynamoDB, run requests on SQS; both built on first use and reused."""

    name = "aws"

    def __init__(self, settings: AwsSettings | None = None, **overrides: Any) -> None:
        base = settings or AwsSettings()
        self.settings = base.with_(**overrides) if overrides else base
        self._lock = threading.Lock()
        self._store: DynamoStore | None = None
        self._queue: SqsQueue | None = None

    @classmethod
    def from_env(cls, **overrides: Any) -> AwsProvider:
        """The provider configured from the environment (keyword ``overrides`` win)."""
        if importlib.util.find_spec("boto3") is None:
            raise ConfigurationError("the AWS provider needs boto3: pip install 'cronwarden[aws]'")
        return cls(AwsSettings.from_env(**overrides))

    def store(self) -> DynamoStore:
        with self._lock:
            if self._store is None:
                self._store = DynamoStore.from_settings(self.settings)
            return self._store

    def queue(self) -> SqsQueue:
        with self._lock:
            if self._queue is None:
                self._queue = SqsQueue.from_settings(self.settings)
            return self._queue

    def close(self) -> None:
        with self._lock:
            if self._queue is not None:
                self._queue.close()
                self._queue = None
            if self._store is not None:
                self._store.close()
                self._store = None

    def __repr__(self) -> str:
        s = self.settings
        return f"AwsProvider(region={s.region!r}, table={s.table!r}, queue={s.queue!r})"


__all__ = ["AwsProvider"]
