"""What every serverless host binding shares: the jobs to serve, which functions are enabled,
and the engine, trigger and watcher of the :class:`~cronwarden.hosting.Composition`.

The GCP functions (``cronwarden.adapters.gcp.functions``) and the Azure function app
(``cronwarden.adapters.azure.functions``) subclass :class:`HostedRuntime` and add their
transport: the queue the trigger publishes to (:meth:`HostedRuntime.run_queue`) and how a
delivery reaches the core ``Worker`` and its verdict the platform.
"""

from __future__ import annotations

import abc

from ..ports import Queue
from .root import Composition


class HostedRuntime(Composition, abc.ABC):
    """What a host's functions share; built lazily, once per instance, thread-safe."""

    @abc.abstractmethod
    def run_queue(self) -> Queue:
        """The queue run requests travel on (checked to be this host's kind)."""
