"""OpenTelemetry metrics and FaaS spans from run log events (SDK in-memory exporters), watcher
metrics, and the Prometheus text endpoint."""

from __future__ import annotations

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
from cronwarden.watch.metrics import RunTelemetry, WatcherMetrics
from cronwarden.watch.metrics_prometheus import serve_metrics
from tests.support.harness import FakeClock, Harness, at, harness


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
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def by(points: list[Any], **labels: Any) -> Any:
    (match,) = [p for p in points if all(p.attributes.get(k) == v for k, v in labels.items())]
    return match


def test_runs_become_metrics_and_faas_spans(h: Harness, otel: Any) -> None:
    reader, spans, _ = otel
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))  # duplicate: skipped
    h.engine.execute(RunRequest("hourly", at("2026-01-20T11:00Z"), payload={"fail": True}))
    found = points(reader)
    assert by(found["cronwarden.runs"], job="hourly", outcome="succeeded").value == 1
    assert by(found["cronwarden.runs"], job="hourly", outcome="failed").value == 1
    assert by(found["cronwarden.run.duration"], job="hourly", outcome="succeeded").count == 1
    assert by(found["cronwarden.run.skips"], job="hourly", reason="duplicate").value == 1
    assert by(found["cronwarden.runs.in_flight"], job="hourly").value == 0

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
    assert by(found["cronwarden.runs"], job="rows", outcome="suspicious").value == 1
    assert by(found["cronwarden.runs"], job="rows", outcome="succeeded").value == 1
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
    h.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
    watcher.check()
    clock.set(at("2026-01-20T13:00:30Z"))  # 11:00 and 12:00 are past their grace
    watcher.check()
    found = points(reader)
    assert by(found["cronwarden.windows.open"], job="hourly").value == 2
    assert by(found["cronwarden.alerts.active"], condition="missed").value == 1
    assert by(found["cronwarden.alerts.active"], condition="failing").value == 0
    assert by(found["cronwarden.dlq.depth"]).value == 0
    assert by(found["cronwarden.watcher.checks"], outcome="ok").value == 2
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
        and 'job="hourly"' in line
        and 'outcome="succeeded"' in line
        and line.endswith(" 1.0")
        for line in lines
    ), text
    assert any(line.startswith("cronwarden_run_duration_seconds_bucket{") for line in lines)
