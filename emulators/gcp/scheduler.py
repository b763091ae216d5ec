"""A local stand-in for Cloud Scheduler: publishes each job's ticks to the schedule topic.

Cloud Scheduler (as rendered by ``cronwarden deploy``) publishes ``{"job": "<name>"}`` with the
attributes ``job`` and ``reason=schedule`` to the schedule topic at every fire time; a push
subscription hands it to the trigger function, which floors the message's publish time to the
job's schedule. :class:`CloudSchedulerDriver` publishes the same message, timed by the core
:class:`~cronwarden.hosting.runtime.Scheduler` (no second scheduler loop), so the emulator setup
runs
the very path production runs. :meth:`CloudSchedulerDriver.fire` publishes one tick now (a
manual run, or a double fire).
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from types import TracebackType
from typing import Self

from cronwarden.hosting.runtime import Clock, Scheduler
from cronwarden.jobs.definitions import JobSet
from cronwarden.model.ports import Queue


def tick_message(job_name: str) -> tuple[bytes, dict[str, str]]:
    """The body and attributes Cloud Scheduler's Pub/Sub target publishes for ``job_name``."""
    return json.dumps({"job": job_name}).encode(), {"job": job_name, "reason": "schedule"}


class CloudSchedulerDriver:
    """Publishes schedule ticks of ``jobs`` to ``schedule_queue`` (the schedule topic)."""

    def __init__(
        self,
        jobs: JobSet,
        schedule_queue: Queue,
        *,
        clock: Clock | None = None,
        max_sleep: float = 1.0,
    ) -> None:
        self.jobs = jobs
        self.queue = schedule_queue
        self.stop_event = threading.Event()
        self.fired: list[tuple[str, datetime | None]] = []
        self._lock = threading.Lock()
        self._scheduler = Scheduler(
            jobs, self._on_due, self.stop_event, clock=clock, max_sleep=max_sleep
        )

    def _on_due(self, job_name: str, window: datetime) -> None:
        self.fire(job_name, window)

    def fire(self, job_name: str, window: datetime | None = None) -> None:
        """Publish one tick for ``job_name`` now (``window`` is only recorded in ``fired``)."""
        body, attributes = tick_message(job_name)
        self.queue.publish(body, attributes=attributes)
        with self._lock:
            self.fired.append((job_name, window))

    def start(self) -> Self:
        self._scheduler.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        if self._scheduler.is_alive():
            self._scheduler.join(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = ["CloudSchedulerDriver", "tick_message"]
