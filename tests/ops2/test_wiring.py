"""The composition root builds the watcher's notifiers and hooks from ``cronwarden.watch.alerting``
settings (once per channel, legacy webhook included), and ``run --metrics-port`` serves
Prometheus text."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import cronwarden
from cronwarden import JobSet, RunContext
from cronwarden.adapters.local import LocalProvider
from cronwarden.hosting import Composition, HostSettings
from cronwarden.watch.alerting.routing import Router
from cronwarden.watch.alerting.watchdog import (
    DeadMansSwitch,
    StoreHeartbeat,
    read_watcher_heartbeat,
)
from tests.ops.conftest import HttpSink, free_port
from tests.support.harness import FakeClock


def _job() -> cronwarden.Job:
    def nightly(ctx: RunContext) -> None:
        return None

    return cronwarden.job("nightly", cron="0 2 * * *", max_runtime="10m", owner="team-data")(
        nightly
    )


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    made = LocalProvider(str(tmp_path / "state.db"))
    yield made
    made.close()


def test_watcher_notifies_through_the_alerting_router_once_per_channel(
    provider: LocalProvider,
    http_sink: HttpSink,
    clock: FakeClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = tmp_path / "alerting.toml"
    settings.write_text(
        f'[channels.data]\ntype = "slack"\nurl = "{http_sink.base}/data"\nowners = ["team-data"]\n'
        f'[heartbeat]\nurl = "{http_sink.base}/ping/abc"\n'
    )
    monkeypatch.setenv("CRONWARDEN_ALERTING_CONFIG", str(settings))
    root = Composition(
        JobSet([_job()]),
        provider=provider,
        host=HostSettings(webhook_url=f"{http_sink.base}/legacy"),
    )
    [router] = root.notifiers
    assert isinstance(router, Router)
    assert sorted(c.name for c in router.channels) == ["data", "log", "webhook"]
    assert [type(h) for h in root.hooks] == [StoreHeartbeat, DeadMansSwitch]

    watcher = root.watcher
    watcher.clock = clock
    watcher.check()  # first sight: nothing owed yet
    clock.advance(3 * 86400)
    report = watcher.check()
    assert [a.kind.value for a in report.fired] == ["missed"]
    # each channel got the alert exactly once (the legacy webhook is not doubled)
    assert len(http_sink.at("/data")) == 1
    assert len(http_sink.at("/legacy")) == 1
    assert "team-data" in http_sink.at("/data")[0].json()["text"]
    assert len(http_sink.at("/ping/abc")) == 2  # dead-man's switch after both checks
    assert read_watcher_heartbeat(provider.store()) is not None


def test_explicit_notifiers_still_win(provider: LocalProvider) -> None:
    root = Composition(JobSet([_job()]), provider=provider, notifiers=[], host=HostSettings())
    assert root.watcher.notifiers == []
    assert any(isinstance(h, StoreHeartbeat) for h in root.watcher.hooks)


def test_run_serves_prometheus_metrics(tmp_path: Path) -> None:
    module = tmp_path / "jobs_metrics.py"
    module.write_text(
        "import cronwarden\n"
        "@cronwarden.job('tick', cron='* * * * *', max_runtime='1m')\n"
        "def tick(ctx):\n    ctx.count('rows', 3)\n"
    )
    port = free_port()
    env = {
        "CRONWARDEN_PROVIDER": "local",
        "CRONWARDEN_LOCAL_PATH": str(tmp_path / "state.db"),
        "PATH": "/usr/bin:/bin",
    }
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "cronwarden"),
            "run",
            "--jobs",
            str(module),
            "--metrics-port",
            str(port),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        text, kind = None, ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text, kind = r.read().decode(), r.headers.get("Content-Type", "")
                    break
            except OSError:
                if process.poll() is not None:
                    raise AssertionError(
                        process.stderr.read().decode() if process.stderr else ""
                    ) from None
                time.sleep(0.2)
        assert text is not None and kind.startswith("text/plain"), kind  # Prometheus text
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(30)
    err = process.stderr.read().decode() if process.stderr else ""
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(line.get("event") == "metrics.serving" for line in logs), logs


def test_without_a_settings_file_the_legacy_webhook_is_sent_once(
    provider: LocalProvider,
    http_sink: HttpSink,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CRONWARDEN_ALERTING_CONFIG", raising=False)
    monkeypatch.delenv("CRONWARDEN_ALERTING_TOML", raising=False)
    root = Composition(
        JobSet([_job()]), provider=provider, host=HostSettings(webhook_url=f"{http_sink.base}/h")
    )
    watcher = root.watcher
    watcher.clock = clock
    watcher.check()
    clock.advance(3 * 86400)
    assert [a.kind.value for a in watcher.check().fired] == ["missed"]
    assert len(http_sink.at("/h")) == 1
