"""The deprecated :class:`PushWorker` (``cronwarden.adapters.gcp.functions.PushWorker`` keeps
naming it): a module of its own because subclassing the core worker loads the engine, which the
functions' module does not load at import (a cold start loads what the first request needs)."""

from __future__ import annotations

from typing import Any

from cronwarden.hosting.trigger import Worker
from cronwarden.run.engine import Engine


class PushWorker(Worker):
    """Deprecated: the core :class:`~cronwarden.Worker` with the push variant of the mapping
    (``in_progress`` is retried, see :func:`~cronwarden.model.settlement.verdict_for`). Use
    ``Worker(engine, in_progress_retries=True)`` and :func:`~.push.push_reply`."""

    def __init__(self, engine: Engine, queue: Any = None) -> None:
        super().__init__(engine, None, in_progress_retries=True)
        self.push_queue = queue
