"""OpenTelemetry metrics and a span per run, from the engine's structured log events.

Needs the ``cronwarden[otel]`` extra; nothing here is imported by ``import cronwarden``, and
OpenTelemetry is imported only when :class:`RunTelemetry` or :class:`WatcherMetrics` is built.

The engine logs every run transition as an event (``run.started``, ``run.completed``,
``run.failed``, ``run.dead_lettered``, ``lease.lost``, ``run.skipped``, ``run.deferred``,
``run.overlap``, ``run.rejected``) with ``job``, ``run_key``, ``run_id`` and ``duration_ms``;
:class:`RunTelemetry` is a :class:`logging.Handler` that turns them into:

===================================== ========= =================================================
``cronwarden.runs``                   counter   finished attempts, by ``cronwarden.job`` and
                                                ``outcome`` (succeeded, suspicious: succeeded but
                                                broke its expectations, failed, dead_lettered,
                                                lease_lost)
``cronwarden.run.duration``           histogram seconds, by ``cronwarden.job`` and ``outcome``;
                                                buckets :data:`DURATION_BUCKETS` (100 ms to 6 h)
``cronwarden.run.skips``              counter   refused deliveries, by ``cronwarden.job`` and
                                                ``reason`` (lock_held, duplicate, in_progress, …)
``cronwarden.runs.in_flight``         up-down   runs started and not finished in this process
``cronwarden.last_success.timestamp`` gauge     Unix seconds of the job's last success
===================================== ========= =================================================

and one span per attempt named after the job, following the FaaS semantic conventions
(``faas.trigger`` timer for scheduled and catch-up windows, else other; ``faas.invocation_id``
the run id; ``faas.time`` the window; ``faas.cron``; ``faas.coldstart`` on the first run of the
process), status ERROR with ``error.type`` when the attempt failed.

The job is the attribute ``cronwarden.job`` (Prometheus: label ``cronwarden_job``), never
``job``: Prometheus reserves ``job`` for the scrape target and would rename ours
``exported_job``. Given the declared jobs, every counter starts at 0 for every job and
outcome (and known skip reason), so ``increase(...)`` sees the first failure.

:class:`WatcherMetrics` is a watcher hook (``Watcher(hooks=[...])``) recording after each check
``cronwarden.dlq.depth``, ``cronwarden.windows.open`` (due windows since the last success, per
job), ``cronwarden.alerts.active`` (1 per active alert by ``cronwarden.job``, ``condition`` and
``owner``; 0 once it recovers), ``cronwarden.last_success.timestamp`` (from the store, so it is
known after a restart), ``cronwarden.watcher.checks`` (by ``outcome``), and the alert outbox
(:mod:`cronwarden.watch.outbox`): ``cronwarden.alert.deliveries`` (counter, by ``channel`` and
``result``: delivered, failed, expired, dropped; Prometheus ``cronwarden_alert_deliveries_total``),
``cronwarden.alert.deliveries.pending`` (channels not yet reached, per ``cronwarden.job``; 0 once
delivered) and ``cronwarden.alert.deliveries.oldest_pending_age`` (seconds since the oldest
undelivered transition was recorded, 0 when none).

:func:`resource` names the service for providers cronwarden builds: ``service.name`` is
``$OTEL_SERVICE_NAME`` (or ``service.name`` in ``$OTEL_RESOURCE_ATTRIBUTES``), else
``cronwarden``, never ``unknown_service``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model.errors import CronwardenError
from ..model.logs import get_logger
from ..model.runs import parse_window

if TYPE_CHECKING:
    from ..jobs.definitions import JobSet
    from .watcher import Report, Watcher

SCOPE = "cronwarden"
SERVICE_NAME = "cronwarden"  #: the default OpenTelemetry ``service.name``
JOB = "cronwarden.job"  #: the job attribute (Prometheus label ``cronwarden_job``)
#: finished-run outcomes, each counted from 0 for every declared job
OUTCOMES = ("succeeded", "suspicious", "failed", "dead_lettered", "lease_lost")
#: skip reasons counted from 0 for every declared job (others appear when they happen)
SKIP_REASONS = ("lock_held", "overlap_refused", "duplicate", "in_progress", "paused")
#: run duration histogram buckets, in seconds: 100 ms to 6 h
DURATION_BUCKETS = (
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0, 3600.0, 7200.0, 14400.0, 21600.0,
)  # fmt: skip
_FINISHED = {
    "run.completed": "succeeded",
    "run.failed": "failed",
    "run.dead_lettered": "dead_lettered",
    "lease.lost": "lease_lost",
}
_REFUSED = {"run.skipped", "run.deferred", "run.overlap", "run.rejected"}
_TIMER_REASONS = {"schedule", "catch_up"}
_MAX_OPEN = 10_000  # runs remembered between start and finish (a crashed run is forgotten)
_MAX_WINDOWS = 1_000  # open windows counted per job, at most


def _version() -> str:
    from .. import __version__

    return __version__


def resource(service_name: str | None = None) -> Any:
    """The OpenTelemetry ``Resource`` for providers cronwarden builds: ``service_name``, else
    ``$OTEL_SERVICE_NAME`` / ``service.name`` in ``$OTEL_RESOURCE_ATTRIBUTES`` (the SDK reads
    them), else ``cronwarden``; plus ``service.version``."""
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    name = service_name or OTELResourceDetector().detect().attributes.get("service.name")
    return Resource.create(
        {"service.name": str(name or SERVICE_NAME), "service.version": _version()}
    )


def _last_success_gauge(meter: Any) -> Any:
    # one definition for RunTelemetry and WatcherMetrics: the SDK returns the same instrument
    return meter.create_gauge(
        "cronwarden.last_success.timestamp",
        unit="s",
        description="Unix time of the job's last successful run",
    )


class RunTelemetry(logging.Handler):
    """A log handler that records run metrics and spans; :meth:`install` attaches it."""

    def __init__(
        self,
        *,
        meter_provider: Any = None,
        tracer_provider: Any = None,
        jobs: JobSet | None = None,
    ) -> None:
        super().__init__(logging.INFO)
        from opentelemetry import metrics, trace

        meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE, _version())
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(SCOPE, _version())
        self.jobs = jobs
        self.runs = meter.create_counter(
            "cronwarden.runs", unit="{run}", description="Finished run attempts by outcome"
        )
        self.duration = meter.create_histogram(
            "cronwarden.run.duration",
            unit="s",
            description="Run attempt duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.skips = meter.create_counter(
            "cronwarden.run.skips",
            unit="{run}",
            description="Deliveries refused without running (skips, deferrals, duplicates)",
        )
        self.in_flight = meter.create_up_down_counter(
            "cronwarden.runs.in_flight", unit="{run}", description="Runs started, not finished"
        )
        self.last_success = _last_success_gauge(meter)
        self._open: dict[str, tuple[int, dict[str, Any]]] = {}
        self._guard = threading.Lock()
        self._cold = True
        self._known: set[str] = set()
        for declared in jobs or ():
            self.initialise(declared.name)

    def initialise(self, job: str) -> None:
        """Start ``job``'s counters at 0 (every outcome and known skip reason), so the first
        failure is an increase that ``increase()`` / ``rate()`` can see. Declared jobs are
        initialised when built; a job first seen in an event is initialised then."""
        with self._guard:
            if job in self._known:
                return
            self._known.add(job)
        for outcome in OUTCOMES:
            self.runs.add(0, {JOB: job, "outcome": outcome})
        for reason in SKIP_REASONS:
            self.skips.add(0, {JOB: job, "reason": reason})
        self.in_flight.add(0, {JOB: job})

    def install(self, logger: logging.Logger | None = None) -> RunTelemetry:
        """Attach to the ``cronwarden`` logger, letting INFO events reach this handler."""
        target = logger or get_logger()
        if target.getEffectiveLevel() > logging.INFO:
            target.setLevel(logging.INFO)
        target.addHandler(self)
        return self

    def uninstall(self, logger: logging.Logger | None = None) -> None:
        (logger or get_logger()).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        job = getattr(record, "job", None)
        if not isinstance(event, str) or not isinstance(job, str):
            return
        if job not in self._known and (
            event == "run.started" or event in _FINISHED or event in _REFUSED
        ):
            self.initialise(job)
        try:
            if event == "run.started":
                self._started(record, job)
            elif event in _FINISHED:
                outcome = _FINISHED[event]
                if outcome == "succeeded" and getattr(record, "suspicious", None):
                    outcome = "suspicious"  # succeeded, but broke its expectations
                self._finished(record, job, outcome)
            elif event in _REFUSED:
                reason = getattr(record, "reason", None)
                if event == "run.deferred":
                    reason = f"deferred_{reason}" if reason else "deferred"
                elif event == "run.overlap":
                    reason = "overlap_refused"
                self.skips.add(1, {JOB: job, "reason": str(reason or event)})
        except Exception:
            self.handleError(record)

    def _started(self, record: logging.LogRecord, job: str) -> None:
        run_id = str(getattr(record, "run_id", ""))
        run_key = str(getattr(record, "run_key", ""))
        reason = getattr(record, "reason", "schedule")
        attributes: dict[str, Any] = {
            "faas.trigger": "timer" if reason in _TIMER_REASONS else "other",
            "faas.invocation_id": run_id,
            "cronwarden.job": job,
            "cronwarden.run_key": run_key,
            "cronwarden.attempt": int(getattr(record, "attempt", 0) or 0),
            "cronwarden.reason": str(reason),
        }
        window = run_key.partition(":")[2]  # job names never contain ':'
        if window:
            with contextlib.suppress(CronwardenError):
                attributes["faas.time"] = parse_window(window).isoformat()
        declared = self.jobs.get(job) if self.jobs is not None else None
        if declared is not None:
            attributes["faas.cron"] = declared.schedule.cron
        with self._guard:
            attributes["faas.coldstart"] = self._cold
            self._cold = False
            if len(self._open) >= _MAX_OPEN:
                self._open.pop(next(iter(self._open)))
            self._open[run_id] = (int(record.created * 1e9), attributes)
        self.in_flight.add(1, {JOB: job})

    def _finished(self, record: logging.LogRecord, job: str, outcome: str) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        run_id = str(getattr(record, "run_id", ""))
        with self._guard:
            opened = self._open.pop(run_id, None)
        if opened is None:
            return  # not started here, or already counted (lease.lost is logged twice)
        start_ns, attributes = opened
        end_ns = int(record.created * 1e9)
        labels = {JOB: job, "outcome": outcome}
        self.in_flight.add(-1, {JOB: job})
        self.runs.add(1, labels)
        if outcome in ("succeeded", "suspicious"):
            self.last_success.set(end_ns / 1e9, {JOB: job})
        duration_ms = getattr(record, "duration_ms", None)
        seconds = (
            duration_ms / 1000
            if isinstance(duration_ms, int | float)
            else max(0.0, (end_ns - start_ns) / 1e9)
        )
        self.duration.record(seconds, labels)
        span = self.tracer.start_span(
            job,
            kind=SpanKind.SERVER,
            start_time=start_ns,
            attributes={**attributes, "cronwarden.outcome": outcome},
        )
        if outcome not in ("succeeded", "suspicious"):
            error_type = getattr(record, "error_type", None) or getattr(record, "reason", outcome)
            span.set_attribute("error.type", str(error_type))
            span.set_status(Status(StatusCode.ERROR, str(error_type)))
        span.end(end_time=end_ns)


class WatcherMetrics:
    """A watcher hook: DLQ depth, open windows per job, active alerts, last success per job,
    checks by outcome (both outcomes counted from 0)."""

    def __init__(self, *, meter_provider: Any = None) -> None:
        from opentelemetry import metrics

        meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE, _version())
        self.dlq_depth = meter.create_gauge(
            "cronwarden.dlq.depth", unit="{message}", description="Messages in the DLQ"
        )
        self.open_windows = meter.create_gauge(
            "cronwarden.windows.open",
            unit="{window}",
            description="Due windows since the job's last success that have not succeeded",
        )
        self.alerts = meter.create_gauge(
            "cronwarden.alerts.active",
            unit="{alert}",
            description="1 while an alert is active, by job, condition and owner",
        )
        self.last_success = _last_success_gauge(meter)
        self.checks = meter.create_counter(
            "cronwarden.watcher.checks", unit="{check}", description="Watcher checks by outcome"
        )
        for outcome in ("ok", "failed"):
            self.checks.add(0, {"outcome": outcome})
        self._active: set[tuple[str, str, str]] = set()
        self.deliveries = meter.create_counter(
            "cronwarden.alert.deliveries",
            unit="{delivery}",
            description="Alert delivery attempts by channel and result",
        )
        self.pending = meter.create_gauge(
            "cronwarden.alert.deliveries.pending",
            unit="{delivery}",
            description="Alert deliveries not yet made (one per transition and channel), by job",
        )
        self.oldest_pending = meter.create_gauge(
            "cronwarden.alert.deliveries.oldest_pending_age",
            unit="s",
            description="Age of the oldest alert transition not yet delivered to every channel",
        )
        self._pending: set[str] = set()
        self._channels: set[str] | None = None

    def after_check(
        self, watcher: Watcher, report: Report | None, error: BaseException | None
    ) -> None:
        self.checks.add(1, {"outcome": "ok" if error is None else "failed"})
        if report is None:
            return
        if report.dlq_depth is not None:
            self.dlq_depth.set(report.dlq_depth)
        now = watcher.clock()
        for item in report.jobs:
            self.open_windows.set(open_windows(item, now), {JOB: item.job.name})
            if item.last_success is not None:
                self.last_success.set(item.last_success.timestamp(), {JOB: item.job.name})
        active = {
            (alert.job, alert.kind.value, str(alert.extra.get("owner") or ""))
            for alert in report.active
        }
        # a recovered alert's series stays, at 0, so a graph shows it ending
        for job, condition, owner in active | self._active:
            value = 1 if (job, condition, owner) in active else 0
            self.alerts.set(value, {JOB: job, "condition": condition, "owner": owner})
        self._active = active
        self._record_deliveries(watcher, now)

    def _record_deliveries(self, watcher: Watcher, now: datetime) -> None:
        state = getattr(watcher, "deliveries", None)
        if state is None:
            return
        if self._channels is None:  # every channel's counters start at 0 (``increase`` sees 1)
            from .outbox import Targets

            self._channels = set(Targets.of(watcher.notifiers).senders)
            for channel in self._channels:
                for result in ("delivered", "failed", "expired", "dropped"):
                    self.deliveries.add(0, {"channel": channel, "result": result})
        for (channel, result), count in state.results.counts.items():
            self.deliveries.add(count, {"channel": channel, "result": result})
        counts: dict[str, int] = {}
        oldest: datetime | None = None
        for item in state.pending():
            counts[item.job] = counts.get(item.job, 0) + 1
            if item.created_at is not None and (oldest is None or item.created_at < oldest):
                oldest = item.created_at
        for job in set(counts) | self._pending:  # a delivered job's series stays, at 0
            self.pending.set(counts.get(job, 0), {JOB: job})
        self._pending = set(counts)
        self.oldest_pending.set(max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)


def open_windows(item: Any, now: datetime) -> int:
    """Due windows of ``item.job`` after its last successful window (at most 1,000).

    Before [windows] gap accounting exists this counts from the last success window (or from
    when the watcher first saw the job) up to the newest window past its grace.
    """
    from ..model.records import parse_iso

    job = item.job
    due = job.schedule.floor(now - job.grace_at(now))
    start = item.last_success_window or parse_iso(item.status.get("first_seen_at"))
    if start is None:
        return 0
    count, window = 0, job.schedule.next_after(start)
    while window <= due and count < _MAX_WINDOWS:
        count += 1
        window = job.schedule.next_after(window)
    return count
