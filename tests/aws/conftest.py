"""An AWS stack on the session's moto server: provider, handlers, schedules, event-source host."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cronwarden.adapters.aws import AwsProvider, AwsSettings
from cronwarden.adapters.aws.functions import LambdaRuntime, make_handlers, runtime_of
from cronwarden.adapters.aws.schedules import aws_cron, schedule_name, tick_input
from cronwarden.emulators.aws import MotoServer
from cronwarden.emulators.aws.driver import ScheduleDriver
from cronwarden.emulators.aws.event_source import EventSourceHost
from cronwarden.jobs import JobSet
from tests.aws import e2e_jobs

TRIGGER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:cw-trigger"
ROLE_ARN = "arn:aws:iam::123456789012:role/cw-scheduler"


@dataclass
class Stack:
    settings: AwsSettings
    provider: AwsProvider
    runtime: LambdaRuntime
    trigger: Any
    worker: Any
    watcher: Any
    host: EventSourceHost
    driver: ScheduleDriver
    sqs: Any
    group: str


def create_schedules(scheduler: Any, jobs: JobSet, group: str, prefix: str = "cw") -> None:
    """One EventBridge schedule per job, as the rendered Terraform declares them."""
    scheduler.create_schedule_group(Name=group)
    for job in jobs:
        scheduler.create_schedule(
            Name=schedule_name(prefix, job.name),
            GroupName=group,
            ScheduleExpression=aws_cron(job),
            ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={
                "Arn": TRIGGER_ARN,
                "RoleArn": ROLE_ARN,
                "Input": tick_input(job),
                "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600},
            },
        )


@pytest.fixture
def stack(moto_server: MotoServer) -> Iterator[Stack]:
    e2e_jobs.POISON["on"] = True
    settings = moto_server.settings(max_receive_count=4)
    provider = AwsProvider(settings)
    trigger, worker, watcher = make_handlers(e2e_jobs, provider=provider, notifiers=[])
    runtime = runtime_of(worker)
    sqs = moto_server.client("sqs")
    queue = provider.queue()
    host = EventSourceHost(sqs, queue.queue_url, worker, batch_size=10)
    scheduler = moto_server.client("scheduler")
    group = settings.table  # fresh per test
    create_schedules(scheduler, runtime.jobs, group)
    driver = ScheduleDriver(scheduler, {TRIGGER_ARN: trigger}, sqs=sqs, group=group)
    try:
        yield Stack(settings, provider, runtime, trigger, worker, watcher, host, driver, sqs, group)
    finally:
        provider.close()
        sqs.close()
        scheduler.close()
