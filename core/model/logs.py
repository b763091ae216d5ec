"""Structured logs: one JSON object per line, with a plain-language ``message``.

Every record cronwarden emits carries an ``event`` name (``run.started``, ``run.skipped``,
``run.completed``, ``run.failed``, ``run.dead_lettered``, ``lease.lost``, ``alert.fired``, …) and,
inside a run, the ``run_id``, ``run_key`` and ``job``. All text passes through
:func:`cronwarden.model.redaction.redact`. Built on :mod:`logging` so it costs nothing at import
time and
plugs into whatever handlers the platform installs (Cloud Logging and Azure Monitor both parse
JSON lines on stdout).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any

from .redaction import redact

LOGGER_NAME = "cronwarden"
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


COMMIT_ENV = "CRONWARDEN_COMMIT"  #: the deployed commit, logged on ``run.started`` when set
#: Cloud Logging reads ``severity`` (these names); Application Insights' ``severityLevel`` names
_APP_INSIGHTS = {
    "DEBUG": "Verbose",
    "INFO": "Information",
    "WARNING": "Warning",
    "ERROR": "Error",
    "CRITICAL": "Critical",
}
_TRACE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "cronwarden_trace", default=None
)


@contextlib.contextmanager
def trace_scope(header: str | None) -> Iterator[None]:
    """Log lines inside carry the host's trace id, from a W3C ``traceparent``
    (``00-<trace>-<span>-01``) or GCP ``X-Cloud-Trace-Context`` (``<trace>/<span>;o=1``) value:
    as ``trace_id`` and ``operation_Id`` (Application Insights), and as
    ``logging.googleapis.com/trace`` when the GCP project is known."""
    trace = _trace_id(header)
    token = _TRACE.set(trace)
    try:
        yield
    finally:
        _TRACE.reset(token)


def _trace_id(header: str | None) -> str | None:
    if not header:
        return None
    text = header.strip()
    parts = text.split("-")
    if len(parts) == 4 and len(parts[1]) == 32:
        return parts[1]
    trace = text.split("/")[0].split(";")[0]
    return trace if trace and all(c in "0123456789abcdefABCDEF" for c in trace) else None


@functools.cache
def _version() -> str:
    try:
        from importlib.metadata import version

        return version("cronwarden")
    except Exception:  # not installed as a distribution (a source tree on sys.path)
        return "unknown"


def get_logger(name: str = "") -> logging.Logger:
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_safe(v) for v in value]
    if isinstance(value, int | float | bool) or value is None:
        return value
    return redact(str(value))


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line: time, level, event, message, then the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "severity": record.levelname,
            "severityLevel": _APP_INSIGHTS.get(record.levelname, "Information"),
            "event": getattr(record, "event", None) or record.name,
            "message": redact(record.getMessage()),
        }
        trace = _TRACE.get()
        if trace:
            body["trace_id"] = body["operation_Id"] = trace
            project = os.environ.get("CRONWARDEN_GCP_PROJECT") or os.environ.get(
                "GOOGLE_CLOUD_PROJECT"
            )
            if project:
                body["logging.googleapis.com/trace"] = f"projects/{project}/traces/{trace}"
        if body["event"] == "run.started":
            body["version"] = _version()
            commit = os.environ.get(COMMIT_ENV)
            if commit:
                body["commit"] = commit
        for key, value in vars(record).items():
            if key not in _RESERVED and key not in body and not key.startswith("_"):
                body[key] = _safe(value)
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            body.setdefault("error_type", type(error).__name__)
            body["traceback"] = redact(self.formatException(record.exc_info))
        return json.dumps(body, ensure_ascii=False, default=str)


def configure(
    level: int | str = logging.INFO, stream: Any = None, *, root: bool = False
) -> logging.Handler:
    """Send cronwarden's logs as JSON lines to ``stream`` (stderr by default). Idempotent.
    ``root``: also format the root logger's lines (libraries' warnings) as JSON, so a host's
    output is JSON lines only."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        if getattr(handler, "_cronwarden", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler._cronwarden = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    if root:
        top = logging.getLogger()
        for existing in list(top.handlers):
            top.removeHandler(existing)
        other = logging.StreamHandler(stream or sys.stderr)
        other.setFormatter(JsonFormatter())
        top.addHandler(other)
    return handler


class RunLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger that adds the run's identity (job, run_key, run_id, attempt) to every line."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        extra = dict(self.extra or {})
        extra.update(kwargs.get("extra") or {})
        kwargs["extra"] = extra
        return msg, kwargs

    def event(self, level: int, event: str, message: str, **fields: Any) -> None:
        """Log ``message`` as ``event`` with ``fields``; ``exc_info`` attaches a traceback."""
        exc_info = fields.pop("exc_info", None)
        self.log(level, message, extra={"event": event, **fields}, exc_info=exc_info)
