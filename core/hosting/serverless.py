"""What every serverless host binding shares: the jobs to serve, which functions are enabled,
and the engine, trigger and watcher of the :class:`~cronwarden.hosting.Composition`.

The GCP functions (``cronwarden.adapters.gcp.functions``) and the Azure function app
(``cronwarden.adapters.azure.functions``) subclass :class:`HostedRuntime` and add their
transport: the queue the trigger publishes to (:meth:`HostedRuntime.run_queue`) and how a
delivery reaches the core ``Worker`` and its verdict the platform.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TypeVar

from ..model.errors import ConfigurationError
from ..model.ports import Delivery, Publisher, Queue
from ..run.engine import Engine
from .root import Composition
from .trigger import Decision, Worker

Q = TypeVar("Q", bound=Queue)


class _InvocationWorker(Worker):
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

    def decide(self, delivery: Delivery, *, extend: Callable[[], None] | None = None) -> Decision:
        try:
            return super().decide(delivery, extend=extend)
        finally:
            self._flush()


class HostedRuntime(Composition, abc.ABC):
    """What a host's functions share; built lazily, once per instance, thread-safe.

    ``in_progress_retries``: the host's platform redelivers a message whose run is still going
    (a push endpoint): its worker answers an in-progress run with a retry, not a postponement
    (see :func:`cronwarden.model.settlement.verdict_for`).
    """

    in_progress_retries: bool = False
    _host_worker: Worker | None = None

    def queue_of(self, kind: type[Q], what: str, provider: str) -> Q:
        """The provider's queue, checked to be ``kind`` (``what`` names the functions that
        need it in the error, ``provider`` the value of the provider setting they need)."""
        queue = self.provider.queue()
        if not isinstance(queue, kind):
            raise ConfigurationError(
                f"{what} need the {provider} provider's {kind.__name__}, "
                f"got {type(queue).__name__} (set CRONWARDEN_PROVIDER={provider})"
            )
        return queue

    @property
    def worker(self) -> Worker:
        """The core worker (decides only; the host applies its verdicts). Each decision
        returns after its job pings were sent (:meth:`Composition.flush_pings`)."""
        with self._lock:
            if self._host_worker is None:
                self._host_worker = _InvocationWorker(
                    self.engine,
                    in_progress_retries=self.in_progress_retries,
                    publisher=self.run_queue,  # completion events of dependents
                    flush=self.flush_pings,
                )
            return self._host_worker

    @abc.abstractmethod
    def run_queue(self) -> Queue:
        """The queue run requests travel on (checked to be this host's kind)."""
