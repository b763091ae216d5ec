"""Push envelopes, schedule ticks, push settlement and the functions' wiring, without emulators."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import JobSet
from cronwarden.adapters.gcp.functions import make_functions, runtime_of
from cronwarden.adapters.gcp.push import (
    ACK_STATUS,
    RETRY_STATUS,
    MalformedEnvelope,
    PushQueue,
    parse_envelope,
    receipt_of,
)
from cronwarden.adapters.gcp.ticks import parse_tick
from cronwarden.adapters.local import LocalProvider
from cronwarden.model.ports import Delivery


def envelope(data: bytes, attributes: dict[str, str] | None = None, **extra: Any) -> bytes:
    message = {
        "data": base64.b64encode(data).decode(),
        "attributes": attributes or {},
        "messageId": "42",
        "message_id": "42",
        "publishTime": "2026-01-20T02:00:01.123456789Z",
    }
    return json.dumps({"message": message, "subscription": "projects/p/subscriptions/s", **extra})


def test_envelope_of_the_emulator_and_of_production() -> None:
    delivery = parse_envelope(envelope(b'{"a": 1}', {"job": "x"}))
    assert delivery.body == b'{"a": 1}' and delivery.attributes == {"job": "x"}
    assert delivery.message_id == "42" and delivery.attempt == 1  # the emulator sends none
    assert delivery.enqueued_at == datetime(2026, 1, 20, 2, 0, 1, 123456, tzinfo=UTC)
    assert receipt_of(delivery).subscription == "projects/p/subscriptions/s"
    assert parse_envelope(envelope(b"x", deliveryAttempt=4)).attempt == 4


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"not json", "not JSON"),
        (b'{"nomessage": 1}', "no 'message'"),
        (json.dumps({"message": {"data": "!!!", "messageId": "1"}}).encode(), "base64"),
        (json.dumps({"message": {"data": "", "attributes": {"a": 1}}}).encode(), "attributes"),
        (json.dumps({"message": {"data": ""}}).encode(), "messageId"),
    ],
)
def test_malformed_envelopes_are_refused(body: bytes, why: str) -> None:
    with pytest.raises(MalformedEnvelope, match=why):
        parse_envelope(body)


def test_ticks_from_push_and_plain_http() -> None:
    tick, delivery, error = parse_tick(envelope(b'{"job": "a"}', {"job": "a"}), {})
    assert tick is not None and not error and delivery is not None
    assert tick.job == "a" and tick.fired_at == datetime(2026, 1, 20, 2, 0, 1, 123456, tzinfo=UTC)
    tick, _, _ = parse_tick(envelope(b"", {"job": "b"}), {})  # attribute only
    assert tick is not None and tick.job == "b"
    tick, delivery, error = parse_tick(envelope(b'{"job": "a"}', {"job": "b"}), {})
    assert tick is None and delivery is not None and "two jobs" in error
    tick, delivery, error = parse_tick(envelope(b"garbage"), {})
    assert tick is None and delivery is not None and "job" in error

    header = {"x-cloudscheduler-scheduletime": "2026-01-20T02:00:00Z"}
    tick, delivery, error = parse_tick(b'{"job": "a"}', header)
    assert tick is not None and delivery is None
    assert tick.fired_at == datetime(2026, 1, 20, 2, 0, tzinfo=UTC)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    tick, _, _ = parse_tick(b'{"job": "a"}', {}, now=now)
    assert tick is not None and tick.fired_at == now
    for bad in (b"[1]", b'{"job": 3}', b"{x"):
        tick, delivery, error = parse_tick(bad, {})
        assert tick is None and delivery is None and error
    assert parse_tick(b'{"job": "a"}', {"X-CloudScheduler-ScheduleTime": "yesterday"})[2]


class FakeInner:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.dead: list[tuple[str, str]] = []

    def publish_dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        if self.fail:
            raise ConnectionError("pubsub down")
        self.dead.append((reason, description))


def test_push_queue_settles_through_the_http_status() -> None:
    inner = FakeInner()
    queue = PushQueue(inner)  # type: ignore[arg-type]
    acked, retried, dead = (parse_envelope(envelope(b"x")) for _ in range(3))
    queue.ack(acked)
    queue.retry(retried, 30.0)
    queue.dead_letter(dead, "MalformedRequest", "bad")
    assert receipt_of(acked).status == ACK_STATUS
    assert receipt_of(retried).status == RETRY_STATUS and receipt_of(retried).delay == 30.0
    assert receipt_of(dead).status == ACK_STATUS and receipt_of(dead).verdict == "dead_letter"
    assert inner.dead == [("MalformedRequest", "bad")]
    queue.retry(acked, 1.0)  # the first settlement wins
    assert receipt_of(acked).status == ACK_STATUS
    # A dead letter that cannot be published is never dropped: Pub/Sub redelivers it.
    failing = PushQueue(FakeInner(fail=True))  # type: ignore[arg-type]
    lost = parse_envelope(envelope(b"x"))
    failing.dead_letter(lost, "MalformedRequest", "bad")
    assert receipt_of(lost).status == RETRY_STATUS


@cronwarden.job("unit-job", cron="0 * * * *", max_runtime="1m")
def unit_job(ctx: cronwarden.RunContext) -> None:
    pass


class Request:
    def __init__(self, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.body, self.headers = body, headers or {}

    def get_data(self) -> bytes:
        return self.body


def test_only_enabled_functions_answer_and_nothing_connects_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRONWARDEN_FUNCTIONS", "watcher")
    provider = LocalProvider(str(tmp_path / "state.db"))
    trigger, worker, watcher = make_functions(JobSet([unit_job]), provider=provider, notifiers=[])
    assert trigger(Request(b'{"job": "unit-job"}'))[1] == 404
    assert worker(Request(envelope(b"x")))[1] == 404
    assert provider._store is None and provider._queue is None  # nothing built yet
    body, status, _ = watcher(Request())
    assert status == 200 and json.loads(body)["ok"] is True  # any provider's store works
    assert runtime_of(watcher) is runtime_of(trigger)
    provider.close()


def test_trigger_and_worker_need_the_gcp_queue(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = LocalProvider(str(tmp_path / "state.db"))
    trigger, worker, _ = make_functions(JobSet([unit_job]), provider=provider)
    assert trigger(Request(b'{"job": "unit-job"}'))[1] == 500
    assert "CRONWARDEN_PROVIDER=gcp" in caplog.text
    with pytest.raises(cronwarden.ConfigurationError, match="CRONWARDEN_PROVIDER=gcp"):
        worker(Request(envelope(b"x")))  # functions-framework answers 500: redelivered
    provider.close()


def test_the_function_module_imports_no_sdk() -> None:
    code = (
        "import sys, cronwarden.adapters.gcp.functions as f;"
        "heavy = [m for m in sys.modules if m.startswith(('google.cloud.firestore', "
        "'google.pubsub', 'google.cloud.pubsub', 'flask', 'grpc'))];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
