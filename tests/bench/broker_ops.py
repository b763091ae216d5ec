"""Broker operations of one happy-path run, counted: a real
:class:`~cronwarden.hosting.trigger.Trigger`
tick and a real pull :class:`~cronwarden.hosting.trigger.Worker` poll over the in-memory queue, with
every queue-port call wrapped and counted (each is one billable broker request)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cronwarden import Engine, JobSet, job
from cronwarden.hosting.trigger import Trigger, Worker
from cronwarden.testing import MemoryStore
from cronwarden.testing.queue import MemoryQueue

PORT_CALLS = ("publish", "receive", "ack", "retry", "extend", "dead_letter")


def count_happy_path() -> dict[str, int]:
    """Port calls (publish, receive, ack, ...) of one scheduled run that succeeds."""
    calls: Counter[str] = Counter()
    queue = MemoryQueue()
    for name in PORT_CALLS:
        original: Callable[..., Any] = getattr(queue, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kw)

        setattr(queue, name, counted)
    jobs = JobSet([job("bill-broker", cron="0 0 * * *", max_runtime="5m")(lambda ctx: None)])
    store = MemoryStore()
    Trigger(jobs, queue, store).tick("bill-broker", datetime.now(UTC))
    handled = Worker(Engine(jobs, store), queue).poll(max_messages=1, wait=0.0)
    if handled != 1:
        raise RuntimeError(f"the worker handled {handled} deliveries, not 1")
    return dict(calls)
