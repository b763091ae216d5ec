"""OpenTelemetry metrics and FaaS spans from run log events (SDK in-memory exporters), watcher
metrics, and the Prometheus text endpoint."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

import cronwarden
from cronwarden import RunContext, RunRequest, Watcher
from cronwarden.watch.metrics import DURATION_BUCKETS, RunTelemetry, WatcherMetrics, resource
from cronwarden.watch.metrics_prometheus import serve_metrics
from tests.support.harness import FakeClock, Harness, at, harness


@pytest.fixture
def h(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    def hourly(ctx: RunContext) -> None:
        if ctx.payload.get("fail"):
            raise ConnectionError("upstream refused")

    job = cronwarden.job(
        "hourly",
        cron="0 * * * *",
        max_runtime="10m",
        retry=cronwarden.Retry(10, 0, 0),
        owner="team-data",
    )(hourly)
    made = harness(tmp_path, [job], clock=clock)
    yield made
    made.close()


@pytest.fixture
def otel(h: Harness) -> Iterator[tuple[InMemoryMetricReader, InMemorySpanExporter, RunTelemetry]]:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    spans = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(spans))
    telemetry = RunTelemetry(meter_provider=meters, tracer_provider=tracers, jobs=h.jobs).install()
    yield reader, spans, telemetry
    telemetry.uninstall()
    meters.shutdown()
    tracers.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resources in data.resource_metrics if data else []:
        for scope in resources.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def by(points: list[Any], **labels: Any) -> Any:
    """The one point with ``labels`` (``cronwarden_job`` is the attribute ``cronwarden.job``)."""
    wanted = {k.replace("cronwarden_", "cronwarden."): v for k, v in labels.items()}
    (match,) = [p for p in points if all(p.attributes.get(k) == v for k, v in wanted.items())]
    return match


def test_runs_become_metrics_and_faas_spans(h: Harness, otel: Any) -> None:
    reader, spans, _ = otel
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))  # duplicate: skipped
    h.engine.execute(RunRequest("hourly", at("2026-01-20T11:00Z"), payload={"fail": True}))
    found = points(reader)
    assert by(found["cronwarden.runs"], cronwarden_job="hourly", outcome="succeeded").value == 1
    assert by(found["cronwarden.runs"], cronwarden_job="hourly", outcome="failed").value == 1
    assert (
        by(found["cronwarden.run.duration"], cronwarden_job="hourly", outcome="succeeded").count
        == 1
    )
    assert by(found["cronwarden.run.skips"], cronwarden_job="hourly", reason="duplicate").value == 1
    assert by(found["cronwarden.runs.in_flight"], cronwarden_job="hourly").value == 0

    ok, failed = sorted(spans.get_finished_spans(), key=lambda s: s.start_time)
    assert ok.name == "hourly" and ok.kind is SpanKind.SERVER
    assert ok.attributes["faas.trigger"] == "timer"
    assert ok.attributes["faas.time"] == "2026-01-20T10:00:00+00:00"
    assert ok.attributes["faas.cron"] == "0 * * * *"
    assert ok.attributes["faas.coldstart"] is True and failed.attributes["faas.coldstart"] is False
    assert (
        ok.attributes["faas.invocation_id"] and ok.attributes["cronwarden.outcome"] == "succeeded"
    )
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "ConnectionError"
    assert failed.end_time >= failed.start_time


def test_a_run_that_breaks_its_expectations_counts_as_suspicious(
    tmp_path: Path, clock: FakeClock
) -> None:
    def rows(ctx: RunContext) -> None:
        ctx.count("rows", int(ctx.payload.get("rows", 0)))

    job = cronwarden.job(
        "rows",
        cron="0 * * * *",
        max_runtime="10m",
        expect=cronwarden.Expect(counters={"rows": (1, None)}),
    )(rows)
    made = harness(tmp_path, [job], clock=clock)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    spans = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(spans))
    telemetry = RunTelemetry(meter_provider=meters, tracer_provider=tracers).install()
    try:
        made.engine.execute(RunRequest("rows", at("2026-01-20T10:00Z")))  # zero rows
        made.engine.execute(RunRequest("rows", at("2026-01-20T11:00Z"), payload={"rows": 3}))
        found = points(reader)
    finally:
        telemetry.uninstall()
        made.close()
    assert by(found["cronwarden.runs"], cronwarden_job="rows", outcome="suspicious").value == 1
    assert by(found["cronwarden.runs"], cronwarden_job="rows", outcome="succeeded").value == 1
    suspicious = [
        s for s in spans.get_finished_spans() if s.attributes["cronwarden.outcome"] == "suspicious"
    ]
    assert len(suspicious) == 1 and suspicious[0].status.status_code is StatusCode.UNSET


def test_manual_runs_are_not_timer_triggered(h: Harness, otel: Any) -> None:
    _, spans, _ = otel
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z"), reason="manual"))
    (span,) = spans.get_finished_spans()
    assert span.attributes["faas.trigger"] == "other"


def test_watcher_metrics_dlq_depth_open_windows_alerts(h: Harness, clock: FakeClock) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    watcher = Watcher(
        h.jobs, h.store, h.queue, notifiers=[], clock=clock,
        hooks=[WatcherMetrics(meter_provider=meters)],
    )  # fmt: skip
    assert by(points(reader)["cronwarden.watcher.checks"], outcome="failed").value == 0
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
    watcher.check()
    clock.set(at("2026-01-20T13:00:30Z"))  # 11:00 and 12:00 are past their grace
    watcher.check()
    found = points(reader)
    assert by(found["cronwarden.windows.open"], cronwarden_job="hourly").value == 2
    missed = by(found["cronwarden.alerts.active"], condition="missed")
    assert missed.value == 1
    assert dict(missed.attributes) == {
        "cronwarden.job": "hourly",
        "condition": "missed",
        "owner": "team-data",
    }
    assert "job" not in missed.attributes  # Prometheus keeps `job` for the scrape target
    success = by(found["cronwarden.last_success.timestamp"], cronwarden_job="hourly")
    assert success.value == pytest.approx(clock().timestamp() - 3 * 3600, abs=60)
    assert by(found["cronwarden.dlq.depth"]).value == 0
    assert by(found["cronwarden.watcher.checks"], outcome="ok").value == 2

    for window in ("2026-01-20T11:00Z", "2026-01-20T12:00Z"):
        h.engine.execute(RunRequest("hourly", at(window)))
    watcher.check()
    found = points(reader)
    assert by(found["cronwarden.alerts.active"], condition="missed").value == 0  # recovered
    meters.shutdown()


def test_prometheus_endpoint_serves_run_metrics(h: Harness) -> None:
    server = serve_metrics(0, "127.0.0.1", jobs=h.jobs)
    try:
        h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
        with urllib.request.urlopen(server.url, timeout=10) as reply:
            text = reply.read().decode()
    finally:
        server.close()
    lines = text.splitlines()
    assert any(
        line.startswith("cronwarden_runs_total{")
        and 'cronwarden_job="hourly"' in line
        and 'outcome="succeeded"' in line
        and line.endswith(" 1.0")
        for line in lines
    ), text
    assert any(line.startswith("cronwarden_run_duration_seconds_bucket{") for line in lines)


@pytest.fixture
def served(h: Harness, clock: FakeClock) -> Iterator[tuple[Harness, Any, Watcher]]:
    """``serve_metrics`` for the harness's jobs, with a watcher hooked to it."""
    server = serve_metrics(0, "127.0.0.1", jobs=h.jobs)
    watcher = Watcher(
        h.jobs, h.store, h.queue, notifiers=[], clock=clock, hooks=[server.watcher_metrics]
    )
    yield h, server, watcher
    server.close()


def scrape(server: Any) -> str:
    with urllib.request.urlopen(server.url, timeout=10) as reply:
        return str(reply.read().decode())


def samples(text: str) -> list[Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(text: str, name: str, **labels: str) -> float:
    (match,) = [
        s
        for s in samples(text)
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    return float(match.value)


def test_prometheus_counters_exist_at_0_from_start_up(served: Any) -> None:
    _, server, _ = served
    text = scrape(server)  # nothing has run yet
    for outcome in ("succeeded", "suspicious", "failed", "dead_lettered", "lease_lost"):
        assert value(text, "cronwarden_runs_total", cronwarden_job="hourly", outcome=outcome) == 0
    for reason in ("lock_held", "overlap_refused", "duplicate", "in_progress", "paused"):
        assert (
            value(text, "cronwarden_run_skips_total", cronwarden_job="hourly", reason=reason) == 0
        )
    assert value(text, "cronwarden_watcher_checks_total", outcome="failed") == 0
    assert value(text, "cronwarden_runs_in_flight", cronwarden_job="hourly") == 0
    assert all("job" not in s.labels for s in samples(text)), text


def test_prometheus_names_labels_and_buckets(served: Any, clock: FakeClock) -> None:
    h, server, watcher = served
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z"), reason="manual"))
    watcher.check()
    clock.set(at("2026-01-20T13:00:30Z"))
    watcher.check()
    text = scrape(server)
    assert value(text, "cronwarden_runs_total", cronwarden_job="hourly", outcome="succeeded") == 1
    assert all("job" not in s.labels and "exported_job" not in s.labels for s in samples(text))
    bounds = {
        s.labels["le"] for s in samples(text) if s.name == "cronwarden_run_duration_seconds_bucket"
    }
    assert bounds == {str(b) for b in DURATION_BUCKETS} | {"+Inf"}
    assert min(DURATION_BUCKETS) == 0.1 and max(DURATION_BUCKETS) == 6 * 3600
    last = value(text, "cronwarden_last_success_timestamp_seconds", cronwarden_job="hourly")
    assert last == pytest.approx(at("2026-01-20T10:00:30Z").timestamp(), abs=60)
    active = value(
        text, "cronwarden_alerts_active", cronwarden_job="hourly", condition="missed",
        owner="team-data",
    )  # fmt: skip
    assert active == 1


def test_promtool_check_metrics_is_clean_on_the_scraped_text(
    served: Any, clock: FakeClock, tmp_path: Path
) -> None:
    tool = promtool()
    h, server, watcher = served
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
    h.engine.execute(RunRequest("hourly", at("2026-01-20T11:00Z"), payload={"fail": True}))
    watcher.check()
    clock.set(at("2026-01-20T13:00:30Z"))
    watcher.check()
    text = scrape(server)
    assert "cronwarden_alerts_active{" in text and "cronwarden_run_duration_seconds_bucket" in text
    checked = subprocess.run(
        [tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", (
        checked.stdout + checked.stderr
    )


def test_the_example_alerting_rules_pass_their_promtool_tests() -> None:
    tool = promtool()
    rules = Path(__file__).resolve().parents[2] / "docs" / "prometheus"
    for argv in (
        [tool, "check", "rules", "cronwarden-rules.yml"],
        [tool, "test", "rules", "cronwarden-rules.test.yml"],
    ):
        done = subprocess.run(argv, cwd=rules, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("env", "argument", "expected"),
    [
        ({}, None, "cronwarden"),
        ({"OTEL_SERVICE_NAME": "billing-runner"}, None, "billing-runner"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=eu-runner,team=data"}, None, "eu-runner"),
        ({"OTEL_SERVICE_NAME": "billing-runner"}, "explicit", "explicit"),
    ],
)
def test_service_name_defaults_to_cronwarden(
    h: Harness,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    argument: str | None,
    expected: str,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    for name, setting in env.items():
        monkeypatch.setenv(name, setting)
    server = serve_metrics(0, "127.0.0.1", jobs=h.jobs, service_name=argument)
    try:
        text = scrape(server)
    finally:
        server.close()
    (info,) = [s for s in samples(text) if s.name == "target_info"]
    assert info.labels["service_name"] == expected
    assert resource(argument).attributes["service.name"] == expected


def promtool() -> str:
    """promtool's path; a missing promtool fails under CI (``$CI`` set), else skips."""
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed (apt-get install -y prometheus)")
        pytest.skip("promtool is not installed (apt-get install -y prometheus)")
    return found


def test_a_job_first_seen_in_an_event_gets_its_counters_at_0(h: Harness) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    telemetry = RunTelemetry(meter_provider=meters).install()  # no declared jobs
    try:
        assert "cronwarden.runs" not in points(reader)
        h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
        found = points(reader)
    finally:
        telemetry.uninstall()
        meters.shutdown()
    assert by(found["cronwarden.runs"], cronwarden_job="hourly", outcome="succeeded").value == 1
    assert by(found["cronwarden.runs"], cronwarden_job="hourly", outcome="failed").value == 0
    assert by(found["cronwarden.run.skips"], cronwarden_job="hourly", reason="lock_held").value == 0
