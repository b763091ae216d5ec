"""Prometheus text endpoint for ``cronwarden run --metrics-port P`` (extra ``cronwarden[otel]``).

:func:`serve_metrics` builds an OpenTelemetry ``MeterProvider`` whose reader is the OTel
Prometheus exporter on a registry of its own, attaches
:class:`~cronwarden.watch.metrics.RunTelemetry`
to the ``cronwarden`` logger, and serves ``/metrics`` with ``prometheus_client``'s HTTP server
on a daemon thread. :meth:`MetricsServer.close` undoes all of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model.errors import ConfigurationError

if TYPE_CHECKING:
    from ..hosting.runtime import LocalRunner
    from ..jobs.definitions import JobSet
    from .metrics import RunTelemetry, WatcherMetrics


@dataclass
class MetricsServer:
    port: int
    host: str
    telemetry: RunTelemetry
    watcher_metrics: WatcherMetrics  #: pass to ``Watcher(hooks=[..., server.watcher_metrics])``
    meter_provider: Any
    _server: Any
    _thread: Any

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self.telemetry.uninstall()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self.meter_provider.shutdown()


def serve_metrics(
    port: int,
    host: str = "127.0.0.1",
    *,
    jobs: JobSet | None = None,
    tracer_provider: Any = None,
    service_name: str | None = None,
) -> MetricsServer:
    """Serve Prometheus text on ``host:port`` (port 0: any free port, see ``.port``).

    Every counter of every job in ``jobs`` is served from 0 at once; ``target_info`` carries
    ``service_name`` (default ``$OTEL_SERVICE_NAME``, else ``cronwarden``, see
    :func:`~cronwarden.watch.metrics.resource`)."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as exc:
        raise ConfigurationError(
            f"metrics need the otel extra (pip install 'cronwarden[otel]'): {exc}"
        ) from None

    from .metrics import RunTelemetry, WatcherMetrics, resource

    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader], resource=resource(service_name))
    try:
        server, thread = start_http_server(port, host, registry=registry)
    except OSError as exc:
        provider.shutdown()
        raise ConfigurationError(f"cannot serve metrics on {host}:{port}: {exc.strerror}") from None
    telemetry = RunTelemetry(
        meter_provider=provider, tracer_provider=tracer_provider, jobs=jobs
    ).install()
    return MetricsServer(
        port=int(server.server_address[1]),
        host=host,
        telemetry=telemetry,
        watcher_metrics=WatcherMetrics(meter_provider=provider),
        meter_provider=provider,
        _server=server,
        _thread=thread,
    )


def serve_runner_metrics(
    runner: LocalRunner,
    port: int,
    host: str = "127.0.0.1",
) -> MetricsServer:
    """``cronwarden run --metrics-port P``: serve ``runner``'s run metrics and its watcher's
    check metrics on ``host:port``; the caller closes the server when the runner stops."""
    from ..model.logs import get_logger

    server = serve_metrics(port, host, jobs=runner.jobs)
    runner.watcher.hooks.append(server.watcher_metrics)
    get_logger("metrics").info(
        "serving Prometheus metrics on %s",
        server.url,
        extra={"event": "metrics.serving", "port": server.port},
    )
    return server
