"""Test your own jobs without a cloud: a fake clock, an in-memory store and queue, one-shot runs
and captured log events::

    from cronwarden.testing import FakeClock, MemoryStore, capture_events, run_once

    def test_nightly_export_succeeds():
        with capture_events() as events:
            outcome = run_once(nightly_export, "2026-01-20T02:00Z")
        assert outcome.kind == "succeeded"
        assert events[-1]["event"] == "run.completed"

:class:`MemoryStore` and :class:`MemoryQueue` pass the same conformance suite as the shipped
adapters. That suite is :mod:`cronwarden.testing.conformance`, reusable by a third-party adapter
(it needs pytest; nothing else here does). See docs/testing.md.
"""

from __future__ import annotations

from .clock import FakeClock
from .events import capture_events
from .faults import Fault, FaultyStore
from .queue import MemoryQueue
from .run import run_once
from .store import MemoryStore

__all__ = [
    "FakeClock",
    "Fault",
    "FaultyStore",
    "MemoryQueue",
    "MemoryStore",
    "capture_events",
    "run_once",
]
