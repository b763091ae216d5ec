"""Undelivered alerts are visible: metrics, ``cronwarden status`` and ``cronwarden check``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from cronwarden import Watcher
from cronwarden.adapters.local import SQLiteStore
from cronwarden.cli import cli
from cronwarden.model.ports import Merge
from cronwarden.model.records import DELIVERIES, status_key_of
from cronwarden.watch.alerting.channels import SlackWebhook
from cronwarden.watch.alerting.routing import Route, Router
from cronwarden.watch.metrics import WatcherMetrics
from tests.support.harness import FakeClock, Harness, at

from .conftest import Sink


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resources in data.resource_metrics if data else []:
        for scope in resources.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def value(found: dict[str, list[Any]], name: str, **labels: str) -> float:
    (point,) = [
        p for p in found.get(name, []) if all(p.attributes.get(k) == v for k, v in labels.items())
    ]
    return float(point.value)


def test_delivery_metrics_count_results_pending_and_oldest_age(
    h: Harness, clock: FakeClock, sink: Sink
) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    w = Watcher(
        h.jobs,
        h.store,
        h.queue,
        notifiers=[Router([Route.of(SlackWebhook("chat", sink.url("/chat")))])],
        clock=clock,
        hooks=[WatcherMetrics(meter_provider=meters)],
    )
    w.check()
    clock.set(at("2026-01-20T13:00:30Z"))
    sink.code = 500
    w.check()
    clock.advance(timedelta(minutes=3))
    found = points(reader)
    assert value(found, "cronwarden.alert.deliveries", channel="chat", result="expired") == 0
    assert value(found, "cronwarden.alert.deliveries", channel="chat", result="failed") == 2
    assert value(found, "cronwarden.alert.deliveries.pending", **{"cronwarden.job": "billing"}) == 1
    assert value(found, "cronwarden.alert.deliveries.oldest_pending_age") == 0
    sink.code = 200
    w.check()
    found = points(reader)
    assert value(found, "cronwarden.alert.deliveries", channel="chat", result="delivered") == 2
    assert value(found, "cronwarden.alert.deliveries.pending", **{"cronwarden.job": "billing"}) == 0
    assert value(found, "cronwarden.alert.deliveries.oldest_pending_age") == 0
    assert len(sink.at("/chat")) == 2
    meters.shutdown()


def test_oldest_pending_age_counts_from_the_transition(
    h: Harness, clock: FakeClock, sink: Sink
) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    sink.down()  # refused
    w = Watcher(
        h.jobs,
        h.store,
        h.queue,
        notifiers=[Router([Route.of(SlackWebhook("chat", sink.url("/chat")))])],
        clock=clock,
        hooks=[WatcherMetrics(meter_provider=meters)],
    )
    w.check()
    clock.set(at("2026-01-20T13:00:30Z"))
    w.check()
    clock.advance(timedelta(minutes=10))
    w.check()
    found = points(reader)
    assert value(found, "cronwarden.alert.deliveries.oldest_pending_age") == 600
    meters.shutdown()


JOBS = (
    "import cronwarden\n"
    "@cronwarden.job('billing', cron='* * * * *', max_runtime='10s', owner='team-pay')\n"
    "def billing(ctx):\n    pass\n"
)


def test_status_and_check_print_undelivered_alerts_and_check_fails_on_a_failing_channel(
    tmp_path: Path, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = tmp_path / "jobs_billing.py"
    jobs.write_text(JOBS)
    (tmp_path / "alerting.toml").write_text(
        f'[channels.chat]\ntype = "slack"\nurl = "{sink.url("/chat")}"\n'
    )
    monkeypatch.setenv("CRONWARDEN_ALERTING_CONFIG", str(tmp_path / "alerting.toml"))
    monkeypatch.setenv("CRONWARDEN_LOCAL_PATH", str(tmp_path / "state.db"))
    monkeypatch.delenv("CRONWARDEN_WEBHOOK_URL", raising=False)
    store = SQLiteStore(str(tmp_path / "state.db"))
    # the engine's counters after three failed runs: the watcher raises `failing`
    store.commit([Merge(status_key_of("billing"), {"consecutive_failures": 3, "error": "boom"})])
    sink.code = 500
    runner = CliRunner()
    checked = runner.invoke(cli, ["check", "--jobs", str(jobs)])
    assert checked.exit_code == 1, checked.output
    assert "ALERT failing" in checked.output
    assert "UNDELIVERED billing: failing fired to chat pending" in checked.output
    assert "HTTP 500" in checked.output
    shown = runner.invoke(cli, ["status", "--jobs", str(jobs), "--output", "table"])
    assert shown.exit_code == 0, shown.output
    assert "UNDELIVERED billing: failing fired to chat pending" in shown.stdout
    piped = runner.invoke(cli, ["status", "--jobs", str(jobs)])  # JSON lines: one row per job
    assert piped.stdout.startswith('{"job": "billing"') and "UNDELIVERED" not in piped.stdout
    assert "UNDELIVERED billing: failing fired to chat pending" in piped.stderr
    # the failures are cleared (a success): the recovery and the retried alert still owe chat
    store.commit([Merge(status_key_of("billing"), {"consecutive_failures": 0})])
    data = store.get(status_key_of("billing"))
    assert data is not None and len(data.data[DELIVERIES]) == 1
    store.close()


def test_the_dashboard_shows_undelivered_alerts(h: Harness, clock: FakeClock, sink: Sink) -> None:
    pytest.importorskip("starlette", reason="the dashboard extra is not installed")
    from starlette.testclient import TestClient

    from cronwarden.dashboard import create_app

    sink.down()  # the channel refuses connections
    w = Watcher(
        h.jobs,
        h.store,
        h.queue,
        notifiers=[Router([Route.of(SlackWebhook("chat", sink.url("/chat")))])],
        clock=clock,
        hooks=[],
    )
    w.check()  # first sight of the jobs
    clock.set(at("2026-01-20T13:00:30Z"))
    w.check()  # `missed` fires for both jobs; neither reaches chat
    client = TestClient(
        create_app(h.jobs, h.store, h.queue, clock=clock, allowed_hosts=("testserver",))
    )
    data = client.get("/api/overview").json()
    assert data["undelivered_alerts"] == 2
    rows = {row["name"]: row for row in data["jobs"]}
    (billing,) = rows["billing"]["undelivered"]
    assert billing["channel"] == "chat" and billing["alert"] == "missed fired"
    assert billing["attempts"] == 1 and billing["error"] and not billing["unrouted"]
    page = client.get("/")
    assert "2 alert delivery(ies) have not reached a channel yet" in page.text
    assert "undelivered: missed fired" in page.text
    sink.up()  # back: the next check delivers, and the dashboard has nothing left to show
    clock.advance(timedelta(hours=1))
    w.check()
    assert client.get("/api/overview").json()["undelivered_alerts"] == 0
