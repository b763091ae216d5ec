"""Capture cronwarden's structured log events as dicts, for assertions."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cronwarden.model.logs import LOGGER_NAME, JsonFormatter


class _Capture(logging.Handler):
    def __init__(self, sink: list[dict[str, Any]]) -> None:
        super().__init__(logging.DEBUG)
        self._sink = sink
        self._format = JsonFormatter()

    def emit(self, record: logging.LogRecord) -> None:
        # The same JSON a deployed worker writes (redacted), read back: what a log query sees.
        self._sink.append(json.loads(self._format.format(record)))


@contextmanager
def capture_events(level: int = logging.DEBUG) -> Iterator[list[dict[str, Any]]]:
    """Collect every event cronwarden logs inside the block, as the dicts of its JSON lines.

    Each dict has ``time``, ``level``, ``event`` (``run.started``, ``run.completed``,
    ``run.failed``, ``lease.lost``, ...), ``message`` and the event's fields (``job``,
    ``run_key``, ``run_id``, ...), redacted exactly as in production::

        with capture_events() as events:
            run_once(nightly_export, "2026-01-20T02:00Z")
        assert [e["event"] for e in events][-1] == "run.completed"

    The list fills while the block runs (events from any thread) and stays readable after it.
    The ``cronwarden`` logger's level is lowered to ``level`` for the block and restored after.
    """
    events: list[dict[str, Any]] = []
    logger = logging.getLogger(LOGGER_NAME)
    handler = _Capture(events)
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield events
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
