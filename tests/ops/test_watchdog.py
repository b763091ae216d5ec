"""Watching the watcher: its heartbeat record, a dead-man's-switch ping after every check
(fail when the check itself failed), per-job pings from the engine's log events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import RunContext, RunRequest, Watcher
from cronwarden.model.errors import StoreUnavailable
from cronwarden.watch.alerting.watchdog import (
    DeadMansSwitch,
    JobPingHandler,
    JobPings,
    StoreHeartbeat,
    read_watcher_heartbeat,
)
from tests.support.harness import FakeClock, Harness, at, harness

from .conftest import HttpSink


@pytest.fixture
def h(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    def hourly(ctx: RunContext) -> None:
        if ctx.payload.get("fail"):
            raise ConnectionError("upstream refused")

    job = cronwarden.job(
        "hourly", cron="0 * * * *", max_runtime="10m", retry=cronwarden.Retry(10, 0, 0)
    )(hourly)
    made = harness(tmp_path, [job], clock=clock)
    yield made
    made.close()


class BrokenStore:
    """The harness store, except that queries fail as if the database were unreachable."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def query(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("database unreachable")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_heartbeat_record_says_when_the_watcher_last_ran(h: Harness, clock: FakeClock) -> None:
    assert read_watcher_heartbeat(h.store) is None
    watcher = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock)  # default hooks
    watcher.check()
    beat = read_watcher_heartbeat(h.store)
    assert beat is not None and beat.ok and beat.error is None
    assert beat.last_check_at == clock() and beat.jobs == 1
    first = beat.last_check_at
    assert beat.age(clock() + timedelta(minutes=5)) == timedelta(minutes=5)
    assert beat.stale(clock() + timedelta(minutes=5), timedelta(minutes=2))

    clock.advance(10)
    before = h.store.round_trips
    watcher.check()  # within a minute of the last recorded success: no extra write
    assert h.store.round_trips - before == 1  # the status query only
    assert read_watcher_heartbeat(h.store).last_check_at == first  # type: ignore[union-attr]
    clock.advance(60)
    watcher.check()
    beat = read_watcher_heartbeat(h.store)
    assert beat is not None and beat.last_check_at == clock()


def test_a_failed_check_is_recorded_and_raised(h: Harness, clock: FakeClock) -> None:
    Watcher(h.jobs, h.store, None, notifiers=[], clock=clock).check()
    broken = Watcher(h.jobs, BrokenStore(h.store), None, notifiers=[], clock=clock)  # type: ignore[arg-type]
    clock.advance(5)
    with pytest.raises(StoreUnavailable):
        broken.check()
    beat = read_watcher_heartbeat(h.store)
    assert beat is not None and not beat.ok and beat.last_check_at == clock()
    assert beat.error is not None and "database unreachable" in beat.error


@pytest.mark.parametrize(
    ("fmt", "ok", "fail"),
    [
        ("healthchecks", ("/ping/abc-uuid", {}), ("/ping/abc-uuid/fail", {})),
        (
            "cronitor",
            ("/p/key/watcher", {"state": ["complete"]}),
            ("/p/key/watcher", {"state": ["fail"]}),
        ),
        (
            "sentry",
            ("/p/key/watcher", {"status": ["ok"]}),
            ("/p/key/watcher", {"status": ["error"]}),
        ),
    ],
)
def test_dead_mans_switch_pings_after_every_check(
    h: Harness,
    clock: FakeClock,
    http_sink: HttpSink,
    fmt: str,
    ok: tuple[str, dict[str, list[str]]],
    fail: tuple[str, dict[str, list[str]]],
) -> None:
    path = "/ping/abc-uuid" if fmt == "healthchecks" else "/p/key/watcher"
    switch = DeadMansSwitch(http_sink.base + path, fmt)
    Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock, hooks=[switch]).check()
    broken = Watcher(
        h.jobs,
        BrokenStore(h.store),
        None,
        notifiers=[],
        clock=clock,
        hooks=[switch],  # type: ignore[arg-type]
    )
    with pytest.raises(StoreUnavailable):
        broken.check()
    first, second = http_sink.received
    assert (first.path, {k: v for k, v in first.query.items() if k != "message"}) == ok
    assert (second.path, {k: v for k, v in second.query.items() if k != "message"}) == fail
    if fmt == "healthchecks":
        assert first.body.startswith(b"ok: 1 job(s), ") and b"database unreachable" in second.body
    if fmt == "cronitor":
        assert "database unreachable" in second.query["message"][0]


def test_a_failing_ping_never_breaks_the_check(
    h: Harness,
    clock: FakeClock,
    http_sink: HttpSink,
    log_lines: Callable[[], list[dict[str, Any]]],
) -> None:
    http_sink.status["/ping/abc-uuid"] = 503
    switch = DeadMansSwitch(http_sink.base + "/ping/abc-uuid")
    report = Watcher(
        h.jobs, h.store, h.queue, notifiers=[], clock=clock, hooks=[StoreHeartbeat(), switch]
    ).check()
    assert report.ok and switch.failures == 1
    assert read_watcher_heartbeat(h.store) is not None
    (line,) = [x for x in log_lines() if x["event"] == "watcher.ping_failed"]
    assert "HTTP 503" in line["message"] and "abc-uuid" not in line["message"]


def test_the_switch_is_on_by_default_from_the_environment(
    h: Harness, clock: FakeClock, http_sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRONWARDEN_HEARTBEAT_URL", http_sink.base + "/ping/env-uuid")
    Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock).check()
    assert [r.path for r in http_sink.received] == ["/ping/env-uuid"]


def test_job_pings_follow_runs_through_the_log_events(
    h: Harness, clock: FakeClock, http_sink: HttpSink
) -> None:
    pings = JobPings(http_sink.base + "/ping/key/{job}", "healthchecks")
    handler = JobPingHandler(pings).install()
    try:
        assert h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z"))).kind.value == (
            "succeeded"
        )
        failing = RunRequest("hourly", at("2026-01-20T11:00Z"), payload={"fail": True})
        assert h.engine.execute(failing).kind.value == "failed"
        pings.flush()
    finally:
        cronwarden.model.logs.get_logger().removeHandler(handler)
        pings.close()
    assert [r.path for r in http_sink.received] == [
        "/ping/key/hourly/start",
        "/ping/key/hourly",
        "/ping/key/hourly/start",
        "/ping/key/hourly/fail",
    ]
    fail = http_sink.received[3].body
    assert b"hourly:2026-01-20T11:00Z failed: ConnectionError: upstream refused" in fail


def test_a_fail_ping_carries_the_redacted_error_text(
    tmp_path: Path, clock: FakeClock, http_sink: HttpSink
) -> None:
    from cronwarden.model.redaction import register_secret

    token = "tok-9f8e7d6c5b4a39281706"
    register_secret(token)

    def leaky(ctx: RunContext) -> None:
        raise cronwarden.PermanentError(f"API refused token {token}: quota exhausted")

    job = cronwarden.job("leaky", cron="0 * * * *", max_runtime="10m")(leaky)
    made = harness(tmp_path, [job], clock=clock)
    pings = JobPings(http_sink.base + "/ping/key/{job}", "healthchecks")
    handler = JobPingHandler(pings).install()
    try:
        assert made.engine.execute(RunRequest("leaky", at("2026-01-20T10:00Z"))).kind.value == (
            "dead_lettered"
        )
        pings.flush()
    finally:
        cronwarden.model.logs.get_logger().removeHandler(handler)
        pings.close()
        made.close()
    (fail,) = http_sink.at("/ping/key/leaky/fail")
    assert b"quota exhausted" in fail.body and b"PermanentError" in fail.body
    assert token.encode() not in fail.body


def test_job_pings_can_watch_only_some_jobs(http_sink: HttpSink) -> None:
    pings = JobPings(http_sink.base + "/p/k/one", "cronitor", jobs=["billing"])
    pings.run_started("billing", "billing:2026-01-20T10:00Z")
    pings.run_succeeded("other", "other:2026-01-20T10:00Z")
    pings.close()
    (got,) = http_sink.received
    assert got.query["state"] == ["run"]


def test_heartbeat_line_for_status(h: Harness, clock: FakeClock) -> None:
    Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock).check()
    beat = read_watcher_heartbeat(h.store)
    assert beat is not None
    line = beat.describe(clock() + timedelta(minutes=3, seconds=5))
    assert line.startswith("watcher last checked 2026-01-20 10:00:30 UTC (3m5s ago) on ")
    assert line.endswith(": ok")
