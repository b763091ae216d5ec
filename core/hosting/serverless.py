"""What every serverless host binding shares: the jobs to serve, which functions are enabled,
and the engine, trigger and watcher of the :class:`~cronwarden.hosting.Composition`.

The GCP functions (``cronwarden.adapters.gcp.functions``) and the Azure function app
(``cronwarden.adapters.azure.functions``) subclass :class:`HostedRuntime` and add their
transport: the queue the trigger publishes to (:meth:`HostedRuntime.run_queue`) and how a
delivery reaches the core ``Worker`` and its verdict the platform.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, TypeVar

from ..model.errors import ConfigurationError
from ..model.ports import Queue
from .root import Composition

if TYPE_CHECKING:
    from .trigger import Worker

Q = TypeVar("Q", bound=Queue)


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
                from ._invocation import InvocationWorker  # the engine loads with it

                self._host_worker = InvocationWorker(
                    self.engine,
                    in_progress_retries=self.in_progress_retries,
                    publisher=self.run_queue,  # completion events of dependents
                    flush=self.flush_pings,
                )
            return self._host_worker

    @abc.abstractmethod
    def run_queue(self) -> Queue:
        """The queue run requests travel on (checked to be this host's kind)."""
