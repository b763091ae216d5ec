"""The watcher alerts on the absence of success, on failures, stuck runs, skips and dead
letters; alerts fire on transitions and recoveries are announced."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import Alert, Condition, RunContext, RunRequest, Watcher, WebhookNotifier
from cronwarden.model.ports import STATUS, Key, Merge
from tests.support.harness import FakeClock, Harness, at, harness


class Collect:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> None:
        self.alerts.append(alert)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(at("2026-01-20T10:00:30Z"))


@pytest.fixture
def h(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    flaky = {"fail": False}

    def hourly(ctx: RunContext) -> None:
        if flaky["fail"]:
            raise ConnectionError("upstream refused: password=s3cr3t-value")

    job = cronwarden.job(
        "hourly",
        cron="0 * * * *",
        max_runtime="10m",
        retry=cronwarden.Retry(10, 0, 0),
        liveness=cronwarden.Liveness(failure_threshold=3),
    )(hourly)
    made = harness(tmp_path, [job], clock=clock)
    made.flaky = flaky  # type: ignore[attr-defined]
    yield made
    made.close()


def watcher(h: Harness, clock: FakeClock, sink: Collect) -> Watcher:
    return Watcher(h.jobs, h.store, h.queue, notifiers=[sink], clock=clock)


def test_missed_fires_after_two_hours_naming_last_success_and_next(
    h: Harness, clock: FakeClock
) -> None:
    sink = Collect()
    w = watcher(h, clock, sink)
    assert h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z"))).kind.value == "succeeded"
    assert w.check().ok
    clock.set(at("2026-01-20T11:30Z"))  # 11:00 window missing, but within its grace
    assert w.check().ok
    clock.set(at("2026-01-20T12:00:30Z"))  # 2 h without success
    report = w.check()
    assert [a.kind for a in report.fired] == [Condition.MISSED]
    alert = report.fired[0]
    assert "last success 2026-01-20 10:00 UTC" in alert.text
    assert "next run expected 2026-01-20 13:00 UTC" in alert.text
    assert "First check" in alert.text
    assert alert.expected_next == at("2026-01-20T13:00Z")
    # Still missing: no second notification (transitions only).
    clock.advance(60)
    assert w.check().fired == [] and not w.check().ok
    # A success recovers it, announced once. [windows] a later success alone does not: the
    # 11:00 window stays unaccounted for until it runs (here: backfilled).
    assert h.engine.execute(RunRequest("hourly", at("2026-01-20T12:00Z"))).kind.value == "succeeded"
    assert not w.check().ok
    backfilled = RunRequest("hourly", at("2026-01-20T11:00Z"), reason="backfill")
    assert h.engine.execute(backfilled).kind.value == "succeeded"
    report = w.check()
    assert [(a.kind, a.firing) for a in report.recovered] == [(Condition.MISSED, False)]
    assert report.ok
    assert [a.firing for a in sink.alerts] == [True, False]


def test_job_that_never_ran_is_missed_once_its_first_window_is_overdue(
    h: Harness, clock: FakeClock
) -> None:
    w = watcher(h, clock, Collect())
    assert w.check().ok  # first sight: nothing is owed yet
    clock.set(at("2026-01-20T11:59Z"))
    assert w.check().ok
    clock.set(at("2026-01-20T12:00:01Z"))
    assert [a.kind for a in w.check().fired] == [Condition.MISSED]


def test_failing_after_threshold_then_recovery(h: Harness, clock: FakeClock) -> None:
    sink = Collect()
    w = watcher(h, clock, sink)
    h.flaky["fail"] = True  # type: ignore[attr-defined]
    window = at("2026-01-20T10:00Z")
    for expected in (False, False, True):
        h.engine.execute(RunRequest("hourly", window))
        fired = w.check().fired
        assert bool(fired) is expected
    alert = sink.alerts[-1]
    assert alert.kind is Condition.FAILING and "3 consecutive failures" in alert.text
    assert "ConnectionError" in alert.text and "s3cr3t-value" not in alert.text
    h.flaky["fail"] = False  # type: ignore[attr-defined]
    h.engine.execute(RunRequest("hourly", window))
    report = w.check()
    assert [a.kind for a in report.recovered] == [Condition.FAILING]


def test_stuck_run_is_reported_with_its_run_id(h: Harness, clock: FakeClock) -> None:
    started = threading.Event()
    release = threading.Event()

    def hold(ctx: RunContext) -> None:
        started.set()
        release.wait(10)

    job = cronwarden.job("holder", cron="0 * * * *", max_runtime="10m")(hold)
    h.engine.jobs.add(job)
    h.jobs.add(job)
    result: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: result.setdefault(
            "o", h.engine.execute(RunRequest("holder", at("2026-01-20T10:00Z")))
        )
    )
    runner.start()
    try:
        assert started.wait(10)
        w = watcher(h, clock, Collect())
        assert Condition.STUCK not in {a.kind for a in w.check().active}
        clock.advance(timedelta(minutes=11))
        stuck = [a for a in w.check().fired if a.kind is Condition.STUCK]
        assert len(stuck) == 1 and stuck[0].job == "holder"
        status = h.store.get(Key(STATUS, "holder"))
        assert status is not None and status.data["run_id"] in stuck[0].text
    finally:
        release.set()
        runner.join(10)


def test_skipping_and_dead_letters(h: Harness, clock: FakeClock) -> None:
    sink = Collect()
    w = watcher(h, clock, sink)
    h.store.commit(
        [Merge(Key(STATUS, "hourly"), {"last_skip_owner": "host:1"}, {"skips_since_success": 3})]
    )
    h.queue.publish(b"garbage")
    h.worker.poll(wait=1.0)
    report = w.check()
    kinds = {a.kind for a in report.fired}
    assert kinds == {Condition.SKIPPING, Condition.DEAD_LETTERS}
    dlq_alert = next(a for a in report.fired if a.kind is Condition.DEAD_LETTERS)
    assert "cronwarden dlq list" in dlq_alert.text
    assert w.check().fired == []
    h.queue.redrive(10)
    delivery = h.queue.receive(1, visibility=30, wait=1)[0]
    h.queue.ack(delivery)
    assert [a.kind for a in w.check().recovered] == [Condition.DEAD_LETTERS]


def test_status_query_is_one_round_trip(h: Harness, clock: FakeClock) -> None:
    for n in range(20):
        h.store.commit([Merge(Key(STATUS, f"job-{n}"), {"status": "succeeded"})])
    w = Watcher(h.jobs, h.store, None, notifiers=[], clock=clock)
    w.check()  # first sight writes first_seen_at
    before = h.store.round_trips
    w.check()
    assert h.store.round_trips - before == 1


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        _Hook.received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


def test_webhook_notifier_posts_slack_compatible_json(h: Harness, clock: FakeClock) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Hook.received.clear()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hooks/T000/B000/secretpath"
        hook = WebhookNotifier(url)
        w = Watcher(h.jobs, h.store, h.queue, notifiers=[hook], clock=clock)
        w.check()
        clock.set(at("2026-01-20T13:00:30Z"))
        w.check()
        assert len(_Hook.received) == 1
        body = _Hook.received[0]
        assert body["text"].startswith("hourly missed")
        assert body["alert"]["alert"] == "missed" and body["alert"]["state"] == "firing"
        assert cronwarden.redact(f"posting to {url}") == "posting to ***"
    finally:
        server.shutdown()
        server.server_close()


def test_broken_webhook_does_not_stop_the_watcher(h: Harness, clock: FakeClock) -> None:

    hook = WebhookNotifier(f"http://127.0.0.1:{_closed_port()}/x", timeout=2)
    w = Watcher(h.jobs, h.store, h.queue, notifiers=[hook], clock=clock)
    w.check()
    clock.set(at("2026-01-20T13:00:30Z"))
    report = w.check()
    assert report.fired and hook.failures == 1


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
