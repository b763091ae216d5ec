"""Structured logs: one JSON object per line, with a plain-language ``message``.

Every record cronwarden emits carries an ``event`` name (``run.started``, ``run.skipped``,
``run.completed``, ``run.failed``, ``run.dead_lettered``, ``lease.lost``, ``alert.fired``, …) and,
inside a run, the ``run_id``, ``run_key`` and ``job``. All text passes through
:func:`cronwarden.redaction.redact`. Built on :mod:`logging` so it costs nothing at import time and
plugs into whatever handlers the platform installs (Cloud Logging and Azure Monitor both parse
JSON lines on stdout).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any

from .redaction import redact

LOGGER_NAME = "cronwarden"
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


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
            "event": getattr(record, "event", None) or record.name,
            "message": redact(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and key not in body and not key.startswith("_"):
                body[key] = _safe(value)
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            body.setdefault("error_type", type(error).__name__)
            body["traceback"] = redact(self.formatException(record.exc_info))
        return json.dumps(body, ensure_ascii=False, default=str)


def configure(level: int | str = logging.INFO, stream: Any = None) -> logging.Handler:
    """Send cronwarden's logs as JSON lines to ``stream`` (stderr by default). Idempotent."""
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
