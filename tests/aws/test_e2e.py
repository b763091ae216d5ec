"""End to end on moto: EventBridge schedule → trigger handler → SQS → local event-source host →
worker handler → DynamoDB records; duplicates, poison messages, crash loops, redrive."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from cronwarden.cli import cli
from cronwarden.emulators.aws import MotoServer
from cronwarden.model import format_window
from cronwarden.model.ports import LOCK, RUN, STATUS, Key
from tests.aws import e2e_jobs
from tests.aws.conftest import Stack

pytestmark = [pytest.mark.aws]


def _hour() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def _schedule(stack: Stack, job: str) -> dict[str, object]:
    (found,) = [s for s in stack.driver.schedules() if s["Name"] == f"cw-{job}"]
    return found


def _run(stack: Stack, job: str, window: datetime) -> dict[str, object]:
    record = stack.provider.store().get(Key(RUN, job, format_window(window)))
    return dict(record.data) if record else {}


def _queue_empty(stack: Stack) -> bool:
    attrs = stack.sqs.get_queue_attributes(
        QueueUrl=stack.provider.queue().queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(attrs["ApproximateNumberOfMessages"])
        + int(attrs["ApproximateNumberOfMessagesNotVisible"])
        == 0
    )


def test_schedule_tick_to_dynamodb_and_a_duplicate_tick_runs_once(stack: Stack) -> None:
    window = _hour()
    schedule = _schedule(stack, "hourly")
    assert schedule["ScheduleExpression"] == "cron(0 * * * ? *)"
    result = stack.driver.fire(schedule, window)
    run_key = f"hourly:{format_window(window)}"
    assert result == {"job": "hourly", "run_keys": [run_key]}
    stack.host.run_until(lambda: _run(stack, "hourly", window).get("state") == "succeeded")
    run = _run(stack, "hourly", window)
    assert run["fence"] == 1 and run["attempt"] == 1
    status = stack.provider.store().get(Key(STATUS, "hourly"))
    assert status is not None and status.data["status"] == "succeeded"
    assert stack.provider.store().get(Key(LOCK, "hourly")) is None

    # EventBridge fires twice (or retries): same scheduled time, same run key, one run.
    stack.driver.fire(schedule, window)
    stack.host.run_until(lambda: _queue_empty(stack))
    assert [c[1] for c in e2e_jobs.calls("hourly")].count(run_key) == 1
    assert stack.host.failed == 0


def test_the_driver_fires_every_schedule_of_an_hour(stack: Stack) -> None:
    start = _hour() - timedelta(hours=1)
    fired = stack.driver.run(start, start)  # hourly and poison at :00; berlin not at this hour
    names = sorted(name for name, _ in stack.driver.fired)
    assert fired == len(names) and {"cw-hourly", "cw-poison"} <= set(names)


@pytest.mark.parametrize(("age", "expected"), [(0, 2), (2, 3)])
def test_round_trips_per_run_on_dynamodb(stack: Stack, age: int, expected: int) -> None:
    """The current window: claim + complete (2). A past window (catch-up, backfill, a late
    retry): + the status read that raising ``last_success_window_ts`` to a maximum needs."""
    from cronwarden.adapters.aws.functions import make_handlers
    from cronwarden.run.engine import EngineSettings

    window = _hour() - timedelta(hours=age)
    now = _hour() + timedelta(minutes=5)  # a fixed clock: well before the next window
    _, worker, _ = make_handlers(
        e2e_jobs, provider=stack.provider, settings=EngineSettings(clock=lambda: now)
    )
    stack.host.handler = worker
    stack.trigger({"v": 1, "job": "hourly", "scheduled_time": window.isoformat()}, None)
    store = stack.provider.store()
    before = store.round_trips
    assert stack.host.poll(wait=5.0) == 1
    spent = store.round_trips - before
    assert _run(stack, "hourly", window)["state"] == "succeeded"
    assert spent == expected


def test_a_duplicate_of_a_finished_window_is_judged_by_what_its_refused_claim_found(
    stack: Stack,
) -> None:
    """The refused claim returns the run record it found (ALL_OLD): no read of it follows, so
    a duplicate costs the refused claim and the status's duplicate count (2)."""
    from cronwarden.adapters.aws.functions import make_handlers
    from cronwarden.run.engine import EngineSettings

    window = _hour()
    now = _hour() + timedelta(minutes=5)
    _, worker, _ = make_handlers(
        e2e_jobs, provider=stack.provider, settings=EngineSettings(clock=lambda: now)
    )
    stack.host.handler = worker
    event = {"v": 1, "job": "hourly", "scheduled_time": window.isoformat()}
    stack.trigger(event, None)
    assert stack.host.poll(wait=5.0) == 1
    assert _run(stack, "hourly", window)["state"] == "succeeded"
    ran = len(e2e_jobs.calls("hourly"))
    stack.trigger(event, None)
    store = stack.provider.store()
    before = store.round_trips
    assert stack.host.poll(wait=5.0) == 1
    assert store.round_trips - before == 2
    status = store.get(Key(STATUS, "hourly"))
    assert status is not None and status.data.get("duplicates") == 1
    assert len(e2e_jobs.calls("hourly")) == ran  # the handler did not run again


def test_poison_is_dead_lettered_with_the_reason_then_redriven_by_the_cli(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = _hour()
    stack.driver.fire(_schedule(stack, "poison"), window)
    queue = stack.provider.queue()
    stack.host.run_until(lambda: queue.dlq_depth() == 1, deadline=60)
    assert [c[2] for c in e2e_jobs.calls("poison")] == [1, 2, 3]  # the job's max_attempts
    run = _run(stack, "poison", window)
    assert run["state"] == "dead_lettered"

    for name, value in stack.settings.to_env().items():
        monkeypatch.setenv(name, value)
    runner = CliRunner()
    listed = runner.invoke(cli, ["dlq", "list", "--provider", "aws"])
    assert listed.exit_code == 0, listed.output
    assert "MaxAttemptsExceeded" in listed.output or "poison" in listed.output
    (dead,) = queue.dlq_peek(10)
    assert dead.reason and dead.reason != "MaxReceiveCountExceeded"
    assert "poisoned input" in dead.description
    shown = runner.invoke(cli, ["dlq", "show", "--provider", "aws", dead.message_id])
    assert shown.exit_code == 0, shown.output
    assert dead.reason in shown.output

    e2e_jobs.POISON["on"] = False
    redriven = runner.invoke(cli, ["dlq", "redrive", "--provider", "aws", "--limit", "5"])
    assert redriven.exit_code == 0, redriven.output
    stack.host.run_until(lambda: _run(stack, "poison", window).get("state") == "succeeded")
    assert queue.dlq_depth() == 0


def test_a_crash_loop_is_moved_to_the_dlq_by_sqs_after_max_receive_count(stack: Stack) -> None:
    """The function dies before answering (out of memory, timeout): SQS's redrive policy is the
    backstop, after ``maxReceiveCount`` receives."""
    crashes: list[int] = []

    def crashing(event: dict[str, object], context: object) -> dict[str, object]:
        (record,) = event["Records"]  # type: ignore[misc]
        crashes.append(int(record["attributes"]["ApproximateReceiveCount"]))
        raise MemoryError("Runtime exited with error: signal: killed")

    stack.trigger({"v": 1, "job": "hourly", "scheduled_time": _hour().isoformat()}, None)
    stack.host.handler = crashing
    stack.host.batch_size = 1
    stack.host.visibility = 1
    queue = stack.provider.queue()
    stack.host.run_until(lambda: queue.dlq_depth() == 1, deadline=60)
    assert crashes == [1, 2, 3, 4]  # maxReceiveCount = 4
    (dead,) = queue.dlq_peek(1)
    assert dead.reason == "MaxReceiveCountExceeded"
    assert json.loads(dead.body)["job"] == "hourly"


def test_malformed_and_unknown_ticks_fail_loudly(stack: Stack) -> None:
    from cronwarden.adapters.aws.schedules import MalformedTick

    with pytest.raises(MalformedTick):
        stack.trigger({"v": 1, "job": "nope", "scheduled_time": _hour().isoformat()}, None)
    with pytest.raises(MalformedTick):
        stack.trigger({"v": 1, "job": "hourly"}, None)


def test_a_failing_tick_goes_to_the_schedule_dead_letter_queue(stack: Stack) -> None:
    from cronwarden.adapters.aws.queue import create_queues

    dlq_url, _ = create_queues(stack.sqs, f"{stack.group}-sched", f"{stack.group}-sched-dlq", 3)
    arn = stack.sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    schedule = dict(_schedule(stack, "hourly"))
    schedule["Target"] = {**schedule["Target"], "DeadLetterConfig": {"Arn": arn}}  # type: ignore[dict-item]
    calls: list[object] = []

    def broken(event: object, context: object) -> object:
        calls.append(event)
        raise ConnectionError("SQS unreachable")

    stack.driver.targets[schedule["Target"]["Arn"]] = broken  # type: ignore[index]
    stack.driver.fire(schedule, _hour())
    assert len(calls) == 3  # first try + MaximumRetryAttempts 2
    got = stack.sqs.receive_message(QueueUrl=dlq_url, WaitTimeSeconds=1).get("Messages", [])
    assert len(got) == 1 and json.loads(got[0]["Body"])["job"] == "hourly"


@pytest.mark.parametrize("kind", ["secret", "parameter"])
def test_the_watcher_reads_its_webhook_url_by_reference(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    from cronwarden.adapters.aws import AwsProvider
    from cronwarden.adapters.aws.functions import make_handlers, runtime_of
    from cronwarden.adapters.aws.secrets import PARAMETER_ENV, SECRET_ENV
    from cronwarden.watch.notify import WebhookNotifier

    url = "https://hooks.example.com/services/T000/B000/very-secret-token"
    name = f"cw-webhook-{kind}-{uuid.uuid4().hex[:6]}"
    if kind == "secret":
        moto_server.client("secretsmanager").create_secret(Name=name, SecretString=url)
        monkeypatch.setenv(SECRET_ENV, name)
    else:
        moto_server.client("ssm").put_parameter(Name=name, Value=url, Type="SecureString")
        monkeypatch.setenv(PARAMETER_ENV, name)
    settings = moto_server.settings()
    for key, value in settings.to_env().items():
        monkeypatch.setenv(key, value)
    provider = AwsProvider(settings)
    _, _, watcher = make_handlers(e2e_jobs, provider=provider)
    try:
        notifiers = runtime_of(watcher).watcher.notifiers
        hooks = [n for n in notifiers if isinstance(n, WebhookNotifier)]
        assert len(hooks) == 1 and hooks[0].url == url
        report = watcher({}, None)
        assert url not in json.dumps(report)
    finally:
        provider.close()


def test_worker_answers_a_mixed_batch_with_exactly_the_failed_records(stack: Stack) -> None:
    """One SQS event, three records: a good run (deleted by Lambda), a poisoned run with
    attempts left (listed: it comes back after its backoff), a malformed body (dead-lettered
    with the reason by the worker itself, so not listed)."""
    from cronwarden.emulators.aws.event_source import sqs_record
    from cronwarden.hosting.trigger import request_attributes
    from cronwarden.model import RunRequest

    queue = stack.provider.queue()
    window = _hour()
    for request in (RunRequest("hourly", window), RunRequest("poison", window)):
        queue.publish(request.to_json(), attributes=request_attributes(request))
    queue.publish(b"{not json", attributes={"job": "hourly"})
    messages: list[dict[str, object]] = []
    while len(messages) < 3:
        messages += stack.sqs.receive_message(
            QueueUrl=queue.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
    event = {"Records": [sqs_record(m, stack.host.queue_arn, "us-east-1") for m in messages]}
    response = stack.worker(event, None)
    by_body = {m["Body"]: m["MessageId"] for m in messages}  # type: ignore[index]
    poison_id = next(i for b, i in by_body.items() if '"poison"' in str(b))
    assert response == {"batchItemFailures": [{"itemIdentifier": poison_id}]}
    (dead,) = queue.dlq_peek(5)
    assert dead.reason == "MalformedRequest" and dead.body == b"{not json"
    assert _run(stack, "hourly", window)["state"] == "succeeded"
    assert _run(stack, "poison", window)["state"] == "failed"


def test_trigger_accepts_ticks_routed_through_an_sqs_queue(stack: Stack) -> None:
    window = _hour()
    good = {
        "messageId": "m1",
        "body": json.dumps({"v": 1, "job": "hourly", "scheduled_time": window.isoformat()}),
    }
    bad = {
        "messageId": "m2",
        "body": json.dumps({"v": 1, "job": "nope", "scheduled_time": window.isoformat()}),
    }
    response = stack.trigger({"Records": [good, bad]}, None)
    assert response == {"batchItemFailures": [{"itemIdentifier": "m2"}]}
    stack.host.run_until(lambda: _run(stack, "hourly", window).get("state") == "succeeded")
