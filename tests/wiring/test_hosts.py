"""Per-job pings from every host that runs jobs, through the composition root: the pull
workers and a function host (whose decision returns only after its pings were sent)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import cronwarden
from cronwarden import JobSet, RunContext
from cronwarden.adapters.local import LocalProvider
from cronwarden.hosting import HostedRuntime
from cronwarden.hosting.pull import PullWorkers
from cronwarden.model.ports import Queue

from .conftest import HttpSink

W = datetime(2026, 1, 20, 10, tzinfo=UTC)


def _jobs() -> JobSet:
    def broken(ctx: RunContext) -> None:
        raise RuntimeError("upstream refused")

    def fine(ctx: RunContext) -> None:
        ctx.count("done")

    return JobSet(
        [
            cronwarden.job(
                "broken", cron="0 * * * *", max_runtime="1m", retry=cronwarden.Retry(1, 0, 0)
            )(broken),
            cronwarden.job("fine", cron="0 * * * *", max_runtime="1m")(fine),
        ]
    )


@pytest.fixture
def pings(http_sink: HttpSink, monkeypatch: pytest.MonkeyPatch) -> HttpSink:
    toml = f'[job_pings]\nurl = "{http_sink.base}/ping/{{job}}"\nformat = "healthchecks"\n'
    monkeypatch.setenv("CRONWARDEN_ALERTING_TOML", toml)
    return http_sink


def test_pull_workers_send_job_pings(pings: HttpSink, tmp_path: Path) -> None:
    pull = PullWorkers(_jobs(), LocalProvider(str(tmp_path / "state.db")), wait=0.2)
    try:
        pull.root.trigger.tick("broken", W)
        pull.root.trigger.tick("fine", W)
        pull.start()
        pings.wait_for(4)
    finally:
        pull.stop(timeout=10)
    paths = sorted(r.path for r in pings.received)
    assert paths == ["/ping/broken/fail", "/ping/broken/start", "/ping/fine", "/ping/fine/start"]
    (fail,) = pings.at("/ping/broken/fail")
    assert b"upstream refused" in fail.body


class _Host(HostedRuntime):
    """The part of a function host this test needs: its run queue."""

    def run_queue(self) -> Queue:
        return self.queue


def test_a_function_hosts_decision_returns_after_its_pings(pings: HttpSink, tmp_path: Path) -> None:
    provider = LocalProvider(str(tmp_path / "state.db"))
    host = _Host(_jobs(), provider=provider)
    try:
        host.trigger.tick("broken", W)
        (delivery,) = provider.queue().receive(1, visibility=60, wait=1)
        decision = host.worker.decide(delivery)
        assert decision.verdict is not None
        # no waiting: the pings were sent before decide returned
        assert sorted(r.path for r in pings.received) == [
            "/ping/broken/fail",
            "/ping/broken/start",
        ]
    finally:
        host.close()
