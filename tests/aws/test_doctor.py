"""``cronwarden doctor`` on AWS (moto): the redrive policy SQS holds, and each job's EventBridge
schedule (exists, enabled, the expression the job's cron renders to), healthy and broken."""

from __future__ import annotations

import json
from typing import Any

import cronwarden
from cronwarden import JobSet, RunContext
from cronwarden.adapters.aws import AwsProvider
from cronwarden.emulators.aws import MotoServer
from cronwarden.ops.doctor import Check, Doctor, failed
from tests.aws.conftest import create_schedules


def _jobs(attempts: int) -> JobSet:
    def nightly(ctx: RunContext) -> None:
        return None

    retry = cronwarden.Retry(max_attempts=attempts)
    return JobSet(
        [
            cronwarden.job(
                "nightly",
                cron="0 2 * * *",
                timezone="Europe/Berlin",
                max_runtime="10m",
                retry=retry,
            )(nightly)
        ]
    )


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def _doctor(jobs: JobSet, provider: Any) -> Doctor:
    return Doctor(jobs, provider, worker_wait=0.0, probe_timeout=30)


def test_aws_healthy_then_broken(moto_server: MotoServer) -> None:
    settings = moto_server.settings(max_receive_count=5)
    group = settings.table
    provider = AwsProvider(settings.with_(schedule_group=group, schedule_prefix="cw"))
    scheduler = moto_server.client("scheduler")
    sqs = moto_server.client("sqs")
    try:
        jobs = _jobs(5)
        create_schedules(scheduler, jobs, group)
        checks = _doctor(jobs, provider).run()
        got = _by_name(checks)
        assert got["store"].ok and got["queue"].ok, [c.line() for c in checks]
        assert got["dead-letter queue"].ok and got["delivery limit"].ok, got
        assert got["schedule of nightly"].ok, got["schedule of nightly"].line()
        assert {c.name for c in failed(checks)} == {"watcher"}  # no watcher ran here

        bad = _by_name(_doctor(_jobs(8), provider).check_dead_letters())
        assert "after 5 deliveries but nightly allows 8" in bad["delivery limit for nightly"].detail

        # the schedule edited by hand: disabled, then firing at another time
        current = scheduler.get_schedule(Name="cw-nightly", GroupName=group)
        keep = {
            k: current[k]
            for k in ("ScheduleExpression", "FlexibleTimeWindow", "Target", "GroupName")
        }
        scheduler.update_schedule(Name="cw-nightly", State="DISABLED", **keep)
        [disabled] = _doctor(jobs, provider).check_schedules()
        assert disabled.ok is False and "DISABLED" in disabled.detail
        keep["ScheduleExpression"] = "cron(0 3 * * ? *)"
        scheduler.update_schedule(Name="cw-nightly", State="ENABLED", **keep)
        [drifted] = _doctor(jobs, provider).check_schedules()
        assert drifted.ok is False and "cron(0 3 * * ? *)" in drifted.detail
        scheduler.delete_schedule(Name="cw-nightly", GroupName=group)
        [gone] = _doctor(jobs, provider).check_schedules()
        assert gone.ok is False and "never fires" in gone.detail

        # the run queue lost its redrive policy
        queue = provider.queue()
        sqs.set_queue_attributes(QueueUrl=queue.queue_url, Attributes={"RedrivePolicy": ""})
        [missing] = _doctor(jobs, provider).check_dead_letters()
        assert missing.ok is False and "no redrive policy" in missing.detail

        # ... or points at a queue cronwarden does not read
        other = sqs.create_queue(QueueName=f"{settings.queue}-elsewhere")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=other, AttributeNames=["QueueArn"])
        policy = {"deadLetterTargetArn": arn["Attributes"]["QueueArn"], "maxReceiveCount": 5}
        sqs.set_queue_attributes(
            QueueUrl=queue.queue_url, Attributes={"RedrivePolicy": json.dumps(policy)}
        )
        [elsewhere] = _doctor(jobs, provider).check_dead_letters()
        assert elsewhere.ok is False and "is not" in elsewhere.detail
    finally:
        provider.close()
        scheduler.close()
        sqs.close()


def test_aws_without_a_schedule_group_says_it_cannot_check(moto_server: MotoServer) -> None:
    provider = AwsProvider(moto_server.settings())
    try:
        [check] = _doctor(_jobs(3), provider).check_schedules()
        assert check.ok is None and "CRONWARDEN_AWS_SCHEDULE_GROUP" in check.detail
    finally:
        provider.close()
