"""A local EventBridge Scheduler: moto stores schedules but never fires them, so this driver
reads them back and fires them at the times their expression names, the way the service does.

For every due occurrence of a schedule it substitutes ``<aws.scheduler.scheduled-time>`` (and
``<aws.scheduler.schedule-arn>``) in the target's input and invokes the handler registered for
the target ARN in-process. A handler that raises is retried up to the schedule's
``RetryPolicy.MaximumRetryAttempts``; then the input goes to the schedule's dead-letter queue
(``DeadLetterConfig.Arn``), as the service does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from cronwarden.model.schedule import Schedule

from .event_source import LambdaContext

Handler = Callable[[Any, Any], Any]


class ScheduleDriver:
    """Fires the schedules of ``group`` through ``targets`` (target ARN → handler)."""

    def __init__(
        self,
        scheduler: Any,
        targets: Mapping[str, Handler],
        *,
        sqs: Any = None,
        group: str = "default",
    ) -> None:
        self.scheduler = scheduler
        self.targets = dict(targets)
        self.sqs = sqs
        self.group = group
        self.fired: list[tuple[str, datetime]] = []
        self.dead_lettered: list[tuple[str, datetime]] = []

    def schedules(self) -> list[dict[str, Any]]:
        names = [
            s["Name"]
            for page in self.scheduler.get_paginator("list_schedules").paginate(
                GroupName=self.group
            )
            for s in page["Schedules"]
        ]
        return [self.scheduler.get_schedule(Name=n, GroupName=self.group) for n in names]

    def occurrences(
        self, schedule: Mapping[str, Any], start: datetime, end: datetime
    ) -> list[datetime]:
        """Fire times of ``schedule`` with ``start <= t <= end`` (UTC)."""
        from cronwarden.adapters.aws.schedules import cron_of_aws

        if schedule.get("State", "ENABLED") != "ENABLED":
            return []
        cron = cron_of_aws(schedule["ScheduleExpression"])
        zone = schedule.get("ScheduleExpressionTimezone") or "UTC"
        return list(Schedule(cron, zone).windows(start, end))

    def fire(self, schedule: Mapping[str, Any], scheduled_time: datetime) -> Any:
        target = schedule["Target"]
        handler = self.targets.get(target["Arn"])
        if handler is None:
            raise KeyError(f"no local handler for target {target['Arn']}")
        stamp = scheduled_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        text = (
            str(target.get("Input") or "{}")
            .replace("<aws.scheduler.scheduled-time>", stamp)
            .replace("<aws.scheduler.schedule-arn>", str(schedule.get("Arn", "")))
        )
        event = json.loads(text)
        retries = int((target.get("RetryPolicy") or {}).get("MaximumRetryAttempts", 0))
        self.fired.append((schedule["Name"], scheduled_time))
        for attempt in range(retries + 1):
            try:
                return handler(event, LambdaContext(function_name=schedule["Name"]))
            except Exception:
                if attempt == retries:
                    self._dead_letter(schedule, text, scheduled_time)
                    return None
        return None  # pragma: no cover

    def run(self, start: datetime, end: datetime) -> int:
        """Fire every occurrence of every schedule in ``[start, end]``, in time order."""
        due = [
            (when, schedule)
            for schedule in self.schedules()
            for when in self.occurrences(schedule, start, end)
        ]
        due.sort(key=lambda pair: (pair[0], pair[1]["Name"]))
        for when, schedule in due:
            self.fire(schedule, when)
        return len(due)

    def _dead_letter(self, schedule: Mapping[str, Any], text: str, when: datetime) -> None:
        self.dead_lettered.append((schedule["Name"], when))
        arn = ((schedule["Target"].get("DeadLetterConfig") or {}).get("Arn")) or ""
        if not arn or self.sqs is None:
            return
        url = self.sqs.get_queue_url(QueueName=arn.split(":")[-1])["QueueUrl"]
        self.sqs.send_message(QueueUrl=url, MessageBody=text)


__all__ = ["ScheduleDriver"]
