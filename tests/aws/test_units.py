"""Pure parts of the AWS provider: settings, schedules (DST), codecs, error mapping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from cronwarden.adapters.aws import AwsSettings
from cronwarden.adapters.aws.errors import store_error
from cronwarden.adapters.aws.queue import (
    decode_attributes,
    decode_body,
    encode_attributes,
    encode_body,
)
from cronwarden.adapters.aws.schedules import (
    MalformedTick,
    aws_cron,
    cron_of_aws,
    due_window,
    parse_tick,
    tick_input,
)
from cronwarden.adapters.aws.store import _Cancelled, decode, encode
from cronwarden.jobs import Job, JobSet
from cronwarden.model.errors import CommitOutcomeUnknown, ConfigurationError, StoreUnavailable
from cronwarden.model.schedule import Schedule


def _job(cron: str, tz: str = "UTC", name: str = "j") -> Job:
    import cronwarden

    @cronwarden.job(name, cron=cron, timezone=tz, max_runtime="1m")
    def handler(ctx: cronwarden.RunContext) -> None:
        pass

    (job,) = list(JobSet([handler]))  # type: ignore[list-item]
    return job


# -- settings -----------------------------------------------------------------------------------
def test_settings_round_trip_through_the_environment() -> None:
    settings = AwsSettings(
        region="eu-west-1",
        endpoint_url="http://127.0.0.1:5000",
        table="t",
        queue="q",
        queue_url="http://x/q",
        dead_letter_queue="dq",
        dead_letter_queue_url="http://x/dq",
        max_receive_count=7,
        create_missing=True,
        connect_timeout=2.5,
        read_timeout=10,
        max_attempts=3,
    )
    assert AwsSettings.from_env(settings.to_env()) == settings
    assert AwsSettings.from_env({}) == AwsSettings()
    assert AwsSettings().dead_letter_queue_name == "cronwarden-runs-dlq"


def test_settings_fall_back_to_the_sdk_region_and_refuse_bad_values() -> None:
    assert AwsSettings.from_env({"AWS_DEFAULT_REGION": "ap-south-1"}).region == "ap-south-1"
    with pytest.raises(ConfigurationError, match="MAX_RECEIVE_COUNT"):
        AwsSettings.from_env({"CRONWARDEN_SQS_MAX_RECEIVE_COUNT": "0"})
    with pytest.raises(ConfigurationError, match="number"):
        AwsSettings.from_env({"CRONWARDEN_AWS_READ_TIMEOUT": "soon"})
    with pytest.raises(ConfigurationError, match="true or false"):
        AwsSettings.from_env({"CRONWARDEN_AWS_CREATE_MISSING": "maybe"})
    with pytest.raises(ConfigurationError, match="unknown"):
        AwsSettings.from_env({}, colour="blue")


def test_provider_is_chosen_by_configuration() -> None:
    from cronwarden.adapters.aws import AwsProvider
    from cronwarden.jobs.config import provider_from_env

    provider = provider_from_env("aws")
    assert isinstance(provider, AwsProvider) and provider.name == "aws"
    assert "secret" not in repr(provider).lower()


# -- schedules ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cron", "tz", "expected"),
    [
        ("*/15 * * * *", "UTC", "cron(*/15 * * * ? *)"),
        ("0 2 * * MON-FRI", "UTC", "cron(0 2 ? * 2,3,4,5,6 *)"),
        ("0 2 * * *", "Europe/Berlin", "cron(0 0,1 * * ? *)"),
        ("0 2 1 * *", "UTC", "cron(0 2 1 * ? *)"),
        ("30 * * * *", "Asia/Kolkata", "cron(0 * * * ? *)"),
    ],
)
def test_aws_cron_is_the_utc_expansion(cron: str, tz: str, expected: str) -> None:
    rendered = aws_cron(_job(cron, tz))
    assert rendered == expected
    assert cron_of_aws(rendered).split()[0] == rendered[5:].split()[0]


def test_aws_cron_refuses_both_day_fields() -> None:
    from cronwarden.model.errors import InvalidJobDefinition

    with pytest.raises(InvalidJobDefinition, match="day"):
        aws_cron(_job("0 2 1 * MON"))


@pytest.mark.parametrize(
    ("cron", "tz", "start"),
    [
        ("30 2 * * *", "Europe/Berlin", datetime(2026, 3, 26, tzinfo=UTC)),  # spring forward
        ("30 2 * * *", "Europe/Berlin", datetime(2026, 10, 22, tzinfo=UTC)),  # fall back
        ("0 1 * * *", "America/New_York", datetime(2026, 3, 5, tzinfo=UTC)),
        ("0 1 * * *", "America/New_York", datetime(2026, 10, 29, tzinfo=UTC)),
        ("*/30 * * * *", "Australia/Lord_Howe", datetime(2026, 4, 2, tzinfo=UTC)),  # 30 min DST
    ],
)
def test_exactly_one_tick_enqueues_each_window_across_dst(
    cron: str, tz: str, start: datetime
) -> None:
    """Every tick of the *rendered* AWS schedule (evaluated in UTC, as EventBridge does with
    ``ScheduleExpressionTimezone = UTC``) maps to the job's own windows: each window in the
    week around a DST change is enqueued by exactly one tick, including the spring-forward day
    EventBridge's own time-zone evaluation would skip."""
    job = _job(cron, tz)
    end = start + timedelta(days=7)
    ticks = list(Schedule(cron_of_aws(aws_cron(job)), "UTC").windows(start, end))
    enqueued = [w for w in (due_window(job, t) for t in ticks) if w is not None]
    windows = [w for w in job.schedule.windows(start, end) if w >= ticks[0]]
    assert sorted(enqueued) == windows
    assert len(set(enqueued)) == len(enqueued)


def test_parse_tick_reads_the_scheduler_input() -> None:
    job = _job("0 * * * *")
    text = tick_input(job).replace("<aws.scheduler.scheduled-time>", "2026-01-20T02:00:00Z")
    tick = parse_tick(text)
    assert tick.job == "j" and tick.scheduled_time == datetime(2026, 1, 20, 2, tzinfo=UTC)
    for bad in ("nope", "[]", '{"job": "j"}', tick_input(job), '{"job":"j","scheduled_time":"x"}'):
        with pytest.raises(MalformedTick):
            parse_tick(bad)


# -- codecs -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value", [0, -5, 2**53 + 1, 10**40, 0.25, 1e20, True, None, "ü", [1, "a"], {"a": {}}]
)
def test_dynamodb_values_round_trip_exactly(value: object) -> None:
    back = decode(encode(value))
    assert back == value and type(back) is type(value)


def test_sqs_bodies_and_attributes_round_trip() -> None:
    for body in (b'{"a":1}', b"", bytes(range(256)), "ü\u0000".encode()):
        text, encoded = encode_body(body)
        system = {"cw-body-encoding": "base64"} if encoded else {}
        assert text and decode_body(text, system) == body
    few = {"job": "a", "x": "ü"}
    assert decode_attributes(encode_attributes(few, {}))[0] == few
    many = {f"k{i}": str(i) for i in range(12)} | {"empty": ""}
    public, _ = decode_attributes(encode_attributes(many, {"cw-dead-letter-reason": "R"}))
    assert public == many


# -- errors -------------------------------------------------------------------------------------
def _client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "TransactWriteItems",
    )


def test_botocore_failures_map_to_the_three_store_outcomes() -> None:
    sent = ReadTimeoutError(endpoint_url="http://x")
    unsent = EndpointConnectionError(endpoint_url="http://x")
    assert type(store_error(sent, write=True, what="w")) is CommitOutcomeUnknown
    assert type(store_error(sent, write=False, what="r")) is StoreUnavailable
    assert type(store_error(unsent, write=True, what="w")) is StoreUnavailable
    assert type(store_error(ConnectTimeoutError(endpoint_url="x"), write=True, what="w")) is (
        StoreUnavailable
    )
    throttled = _client_error("ProvisionedThroughputExceededException", 400)
    assert type(store_error(throttled, write=True, what="w")) is StoreUnavailable
    crashed = _client_error("InternalServerError", 500)
    assert type(store_error(crashed, write=True, what="w")) is CommitOutcomeUnknown
    missing = _client_error("ResourceNotFoundException", 400)
    assert isinstance(store_error(missing, write=False, what="r"), ConfigurationError)
    assert store_error(_client_error("AccessDeniedException", 400), write=True, what="w") is None


def test_cancellation_reasons_name_the_failing_op() -> None:
    error = _client_error("TransactionCanceledException", 400)
    error.response["CancellationReasons"] = [  # type: ignore[typeddict-unknown-key]
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed"},
    ]
    assert _Cancelled(error).failed_index() == 1
    error.response["CancellationReasons"] = [{"Code": "TransactionConflict"}, {"Code": "None"}]  # type: ignore[typeddict-unknown-key]
    assert _Cancelled(error).failed_index() is None
    bare = ClientError(
        {
            "Error": {
                "Code": "TransactionCanceledException",
                "Message": "Transaction cancelled, please refer cancellation reasons for "
                "specific reasons [None, None, ConditionalCheckFailed]",
            }
        },
        "TransactWriteItems",
    )
    assert _Cancelled(bare).failed_index() == 2
