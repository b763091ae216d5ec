"""The AWS provider: DynamoDB store and SQS queue, configured by :class:`~.settings.AwsSettings`
(environment names in :mod:`.settings`). Credentials come from boto3's default chain."""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

from cronwarden.jobs.definitions import Job
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Provider

from ._clients import client
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
        self._scheduler: Any = None

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

    def schedule_state(self, job: Job) -> tuple[bool | None, str]:
        """For ``cronwarden doctor``: whether ``job``'s EventBridge schedule exists, is enabled
        and fires the UTC expression its cron renders to (drift after a schedule edited by
        hand is a silent stop). Needs ``scheduler:GetSchedule``. ``None`` (cannot check) when
        no schedule group is configured."""
        from .schedules import aws_cron, schedule_name

        group = self.settings.schedule_group
        if not group:
            return None, (
                "set CRONWARDEN_AWS_SCHEDULE_GROUP (the deployment's prefix) to check the "
                "EventBridge schedules"
            )
        name = schedule_name(self.settings.schedule_prefix or group, job.name)
        with self._lock:
            if self._scheduler is None:
                self._scheduler = client("scheduler", self.settings)
            scheduler = self._scheduler
        try:
            found = scheduler.get_schedule(Name=name, GroupName=group)
        except scheduler.exceptions.ResourceNotFoundException:
            return False, f"no schedule {name!r} in group {group!r}: {job.name} never fires"
        state = str(found.get("State") or "ENABLED")
        if state != "ENABLED":
            return False, f"schedule {name!r} is {state}: {job.name} does not fire"
        expression, wanted = str(found.get("ScheduleExpression") or ""), aws_cron(job)
        zone = str(found.get("ScheduleExpressionTimezone") or "UTC")
        if expression != wanted or zone != "UTC":
            return False, (
                f"schedule {name!r} fires {expression} ({zone}) but {job.name}'s cron "
                f"renders as {wanted} (UTC): re-deploy"
            )
        return True, f"{name} enabled, {expression} (UTC)"

    def close(self) -> None:
        with self._lock:
            if self._queue is not None:
                self._queue.close()
                self._queue = None
            if self._store is not None:
                self._store.close()
                self._store = None
            if self._scheduler is not None:
                self._scheduler.close()
                self._scheduler = None

    def __repr__(self) -> str:
        s = self.settings
        return f"AwsProvider(region={s.region!r}, table={s.table!r}, queue={s.queue!r})"


__all__ = ["AwsProvider"]
