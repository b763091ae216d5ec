"""The worker of a function host (:class:`~cronwarden.hosting.serverless.HostedRuntime`): a
module of its own so that importing the host (its cold start) does not load the trigger and
the engine; they load with the first invocation that needs a worker."""

from __future__ import annotations

from collections.abc import Callable

from ..model.ports import Delivery, Publisher
from ..run.engine import Engine
from .trigger import Decision, Worker


class InvocationWorker(Worker):
    """The core worker of a function host: after each decision, the job pings of its run are
    sent before the invocation returns (a platform may freeze the instance right after)."""

    def __init__(
        self,
        engine: Engine,
        *,
        in_progress_retries: bool,
        publisher: Callable[[], Publisher],
        flush: Callable[[], None],
    ) -> None:
        super().__init__(engine, in_progress_retries=in_progress_retries, publisher=publisher)
        self._flush = flush

    def decide(
        self,
        delivery: Delivery,
        *,
        extend: Callable[[], None] | None = None,
        then: Delivery | None = None,
    ) -> Decision:
        """``then`` is ignored: an invocation decides one delivery, and the platform may send
        the next to another instance (a claim handed to it would wait out its lease)."""
        try:
            return super().decide(delivery, extend=extend)
        finally:
            self._flush()
