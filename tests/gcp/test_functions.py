"""End to end on the emulators: Cloud Scheduler (our driver) → schedule topic → push → the
trigger function → run-request topic → push → the worker function (functions-framework's
``create_app`` on a real loopback HTTP server) → the handler → Firestore records."""

from __future__ import annotations

import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwarden import RunRequest
from cronwarden.emulators.gcp import FirestoreEmulator, PubSubEmulator
from cronwarden.hosting.trigger import request_attributes
from cronwarden.model import format_window
from cronwarden.model.ports import REASON_ATTRIBUTE, RUN, STATUS, Key
from tests.support.procs import poll

from . import e2e_jobs
from .hosting import WebhookSink, deployed

pytestmark = [pytest.mark.gcp, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    with e2e_jobs.LOCK:
        e2e_jobs.CALLS.clear()
    e2e_jobs.POISON["on"] = True


def record(deployment: Any, kind: str, job: str, id_: str = "") -> dict[str, Any]:
    found = deployment.store.get(Key(kind, job, id_))
    return dict(found.data) if found else {}


def minute_floor(when: datetime) -> datetime:
    return when.replace(second=0, microsecond=0)


def publish_request(deployment: Any, request: RunRequest) -> None:
    deployment.runs.publish(
        request.to_json(), attributes=request_attributes(request), dedup_id=request.run_key
    )


def test_scheduler_tick_runs_the_job_through_push_and_records_it_in_firestore(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pubsub_emulator: PubSubEmulator,
    firestore_emulator: FirestoreEmulator,
) -> None:
    with deployed(tmp_path, monkeypatch, pubsub_emulator, firestore_emulator) as d:
        # The core Scheduler times the driver; its clock is set just before a minute boundary
        # so the tick comes at once. The window comes from the message's publish time.
        real = datetime.now(UTC)
        boundary = minute_floor(real) + timedelta(minutes=1)
        offset = boundary - real - timedelta(seconds=0.3)
        driver = d.driver("every-minute", clock=lambda: datetime.now(UTC) + offset, max_sleep=0.1)
        driver.start()
        (call,) = poll(lambda: e2e_jobs.calls("every-minute"), deadline=30, what="handler ran")
        _, run_key, _ = call
        window = run_key.split(":", 1)[1]
        run = poll(
            lambda: (
                record(d, RUN, "every-minute", window).get("state") == "succeeded"
                and record(d, RUN, "every-minute", window)
            ),
            what="run record succeeded",
        )
        assert run["attempt"] == 1 and run["fence"] == 1 and run["reason"] == "schedule"
        status = record(d, STATUS, "every-minute")
        assert status["status"] == "succeeded" and status["run_key"] == run_key
        assert status["last_success_at"] and status["consecutive_failures"] == 0
        assert len(driver.fired) == 1
        # Happy path on Firestore: two commits by the worker (claim, complete), none by the
        # trigger (no catch-up policy), nothing else.
        assert d.runtime("worker").provider.store().round_trips == 2
        assert d.runtime("trigger").provider.store().round_trips == 0

        # Trigger → handler latency, tick by tick (distinct jobs, so distinct run keys).
        samples = []
        for i in range(10):
            name = f"lat-{i}"
            sent = time.time()
            d.driver(name).fire(name)
            (call,) = poll(lambda n=name: e2e_jobs.calls(n), deadline=30, what=f"{name} ran")
            samples.append(call[2] - sent)
        samples.sort()
        p50 = statistics.median(samples)
        p95 = samples[int(0.95 * (len(samples) - 1))]
        print(f"\ntick -> handler latency: p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
        assert p95 < 10.0


def test_double_fire_runs_the_window_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pubsub_emulator: PubSubEmulator,
    firestore_emulator: FirestoreEmulator,
) -> None:
    with deployed(tmp_path, monkeypatch, pubsub_emulator, firestore_emulator) as d:
        driver = d.driver("hourly")
        driver.fire("hourly")  # Cloud Scheduler firing twice for one schedule time
        driver.fire("hourly")
        poll(
            lambda: (
                record(d, STATUS, "hourly").get("duplicates", 0) >= 1
                and record(d, STATUS, "hourly").get("status") == "succeeded"
            ),
            what="the second request judged a duplicate",
        )
        calls = e2e_jobs.calls("hourly")
        assert len(calls) == 1, calls
        window = calls[0][1].split(":", 1)[1]
        assert record(d, RUN, "hourly", window)["attempt"] == 1
        assert d.runs.dlq_depth() == 0


def test_poison_job_is_retried_dead_lettered_visible_and_redriven(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pubsub_emulator: PubSubEmulator,
    firestore_emulator: FirestoreEmulator,
) -> None:
    with deployed(tmp_path, monkeypatch, pubsub_emulator, firestore_emulator) as d:
        d.driver("poison").fire("poison")
        (letter,) = poll(lambda: d.runs.dlq_peek(), deadline=60, what="dead letter")
        assert letter.reason == "MaxAttemptsExceeded"
        assert "poisoned input" in letter.description and "3 attempt(s)" in letter.description
        calls = e2e_jobs.calls("poison")
        assert len(calls) == 3 and len({c[1] for c in calls}) == 1  # Pub/Sub redelivered
        window = calls[0][1].split(":", 1)[1]
        run = record(d, RUN, "poison", window)
        assert run["state"] == "dead_lettered" and run["attempt"] == 3
        assert "poisoned input" in run["error"]
        raw = d.runs._pull(d.runs.dead_letter_subscription, 10)
        assert dict(raw[0].message.attributes)[REASON_ATTRIBUTE] == "MaxAttemptsExceeded"
        d.runs._release(raw)
        assert d.runs.dlq_depth() == 1

        # The watcher function sees it: the job's dead letter and the job failing (one
        # incident, the job's: the queue-wide alert is for letters no job accounts for).
        status, body = d.post("watcher", b"")
        assert status == 500 and body["ok"] is False and body["dlq_depth"] == 1
        kinds = {(a["job"], a["alert"]) for a in body["active"]}
        assert kinds == {("poison", "dead_letters"), ("poison", "failing")}

        # Fix the cause, redrive: a fresh attempt budget, and it succeeds.
        e2e_jobs.POISON["on"] = False
        assert d.runs.redrive(10) == 1
        poll(
            lambda: record(d, RUN, "poison", window).get("state") == "succeeded",
            what="redriven run succeeded",
        )
        run = record(d, RUN, "poison", window)
        assert run["attempt"] == 4 and run["redrive"] == 1
        assert d.runs.dlq_depth() == 0
        status, body = d.post("watcher", b"")
        assert body["dlq_depth"] == 0
        assert ("_watcher", "dead_letters") not in {(a["job"], a["alert"]) for a in body["active"]}


def test_malformed_messages_are_dead_lettered_with_a_reason_and_serving_goes_on(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pubsub_emulator: PubSubEmulator,
    firestore_emulator: FirestoreEmulator,
) -> None:
    with deployed(tmp_path, monkeypatch, pubsub_emulator, firestore_emulator) as d:
        now = minute_floor(datetime.now(UTC))
        unknown = RunRequest("no-such-job", now)
        off_schedule = RunRequest("poison", now.replace(minute=7) if now.minute != 7 else now)
        bad = {
            b"{not json": {"job": "every-minute"},
            unknown.to_json(): request_attributes(unknown),
            b"\x00\xff\xfe binary": {},
            off_schedule.to_json(): {"job": "poison"},
        }
        for body, attributes in bad.items():
            d.runs.publish(body, attributes=attributes)
        # Scheduler messages that can never become a tick: dead-lettered by the trigger.
        d.schedule.publish(b"garbage", attributes={"reason": "schedule"})
        d.schedule.publish(json.dumps({"job": "no-such-job"}).encode())
        good = RunRequest("every-minute", now - timedelta(minutes=3))
        publish_request(d, good)

        letters = poll(
            lambda: len(d.runs.dlq_peek(20)) >= 6 and d.runs.dlq_peek(20),
            deadline=60,
            what="six dead letters",
        )
        by_body = {letter.body: letter for letter in letters}
        assert set(by_body) >= set(bad)
        for body in bad:
            assert by_body[body].reason == "MalformedRequest", by_body[body]
            assert by_body[body].description
        assert "unknown job" in by_body[unknown.to_json()].description
        assert "not a window" in by_body[off_schedule.to_json()].description
        ticks = [letter for letter in letters if letter.reason == "MalformedTick"]
        assert len(ticks) == 2
        assert any("unknown job" in t.description for t in ticks)
        raw = d.runs._pull(d.runs.dead_letter_subscription, 20)
        assert all(REASON_ATTRIBUTE in item.message.attributes for item in raw)
        d.runs._release(raw)
        # The worker kept serving: the good request ran.
        poll(
            lambda: (
                record(d, RUN, "every-minute", format_window(good.window)).get("state")
                == "succeeded"
            ),
            what="good request ran",
        )
        assert len(d.runs.dlq_peek(20)) == 6

        # Requests that are not Pub/Sub pushes at all: 400, nothing to dead-letter.
        assert d.post("worker", b"not an envelope")[0] == 400
        assert d.post("worker", json.dumps({"message": {"data": "!!"}}).encode())[0] == 400
        # Plain HTTP ticks (a Cloud Scheduler HTTP target): schedule time from the header.
        status, body = d.post(
            "trigger",
            json.dumps({"job": "every-minute"}).encode(),
            {"X-CloudScheduler-ScheduleTime": "2026-01-20T02:00:00.500Z"},
        )
        assert status == 200 and body["run_keys"] == ["every-minute:2026-01-20T02:00Z"]
        assert d.post("trigger", json.dumps({"job": "no-such-job"}).encode())[0] == 400
        assert d.post("trigger", b"[1, 2]")[0] == 400


def test_watcher_function_alerts_missed_from_firestore_status(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pubsub_emulator: PubSubEmulator,
    firestore_emulator: FirestoreEmulator,
) -> None:
    sink = WebhookSink()
    try:
        env = {"CRONWARDEN_WEBHOOK_URL": sink.url}
        with deployed(tmp_path, monkeypatch, pubsub_emulator, firestore_emulator, env=env) as d:
            old = RunRequest(
                "every-minute", minute_floor(datetime.now(UTC)) - timedelta(minutes=10)
            )
            publish_request(d, old)
            poll(
                lambda: record(d, STATUS, "every-minute").get("status") == "succeeded",
                what="an old window succeeded",
            )
            status, body = d.post("watcher", b"")
            assert status == 500 and body["ok"] is False
            assert body["jobs"]["every-minute"] == ["missed"]
            (missed,) = [a for a in body["active"] if a["job"] == "every-minute"]
            assert missed["alert"] == "missed" and "no success for the" in missed["text"]
            (hook,) = poll(sink.received, what="webhook alert")
            assert hook["alert"]["alert"] == "missed" and hook["alert"]["state"] == "firing"
            assert "every-minute missed" in hook["text"]
            # Alerts fire on transitions: a second check notifies nobody.
            assert d.post("watcher", b"")[0] == 500
            assert len(sink.received()) == 1
            # A success for the current window recovers it. [windows] together with the
            # windows that never ran since the old one: a later success alone leaves them gaps.
            # One at a time, so that none waits behind another's lock (slow under load).
            current = minute_floor(datetime.now(UTC))
            for back in range(10, -1, -1):
                reason = "backfill" if back else "schedule"
                window = current - timedelta(minutes=back)
                publish_request(d, RunRequest("every-minute", window, reason=reason))
                poll(
                    lambda w=window: (
                        record(d, RUN, "every-minute", format_window(w)).get("state") == "succeeded"
                    ),
                    what=f"window {format_window(window)} ran",
                    deadline=60,
                )

            def healthy() -> bool:
                # the scheduler keeps firing while we wait: a minute that passes is a window
                now_window = minute_floor(datetime.now(UTC))
                publish_request(d, RunRequest("every-minute", now_window))
                return bool(d.post("watcher", b"")[0] == 200)

            poll(healthy, what="watcher healthy again", deadline=90)
            recovered = poll(lambda: sink.received()[1:], what="recovery notice")
            assert recovered[0]["alert"]["state"] == "recovered"
    finally:
        sink.stop()
