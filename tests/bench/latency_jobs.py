"""Jobs for the trigger → handler latency measurement: each handler records when it started.

Distinct jobs give distinct run keys for ticks fired within one minute (the window is the tick
time floored to the schedule)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from cronwarden import JobSet, job

SAMPLES = 30
STARTED: dict[str, float] = {}  #: job name -> time.time() when its handler started
EVENTS: dict[str, threading.Event] = {}


def _recorder(name: str) -> Callable[[Any], None]:
    EVENTS[name] = threading.Event()

    def handler(ctx: Any) -> None:
        STARTED.setdefault(name, time.time())
        EVENTS[name].set()

    return handler


JOBS = JobSet(
    job(f"lat-{i}", cron="* * * * *", max_runtime="1m")(_recorder(f"lat-{i}"))
    for i in range(SAMPLES)
)
globals().update({f"lat_{i}": JOBS[f"lat-{i}"] for i in range(SAMPLES)})


def reset() -> None:
    STARTED.clear()
    for event in EVENTS.values():
        event.clear()


def wait(name: str, timeout: float = 30.0) -> float:
    if not EVENTS[name].wait(timeout):
        raise TimeoutError(f"{name}: handler did not run within {timeout}s")
    return STARTED[name]
