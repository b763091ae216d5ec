"""The composition root: configuration → provider → store, queue, engine, trigger, worker,
watcher and notifiers, the same way for every host.

``LocalRunner`` (``cronwarden run``), the pull workers (:mod:`cronwarden.hosting.pull`), the GCP
functions and the Azure function app all build their object graph through :class:`Composition`;
hosts differ only in how deliveries reach :meth:`~cronwarden.trigger.Worker.decide` and how
they apply its verdict. Everything is built lazily, once, thread-safe: a cold start connects
nothing before the first invocation.
"""

from __future__ import annotations

import threading
from types import ModuleType

from ..engine import Engine, EngineSettings
from ..errors import ConfigurationError
from ..jobs import JobSet
from ..liveness import Watcher
from ..notify import LogNotifier, Notifier, WebhookNotifier
from ..ports import Provider, Publisher, Queue, Store
from ..trigger import Trigger, Worker
from .settings import HostSettings


def jobset_of(target: ModuleType | JobSet | str) -> JobSet:
    """The jobs of a module, a ``JobSet``, or a module name / path; refuses an empty set."""
    if isinstance(target, JobSet):
        jobs = target
    elif isinstance(target, ModuleType):
        jobs = JobSet.from_module(target)
    else:
        from ..config import load_jobs

        return load_jobs(target)
    if not len(jobs):
        raise ConfigurationError("no jobs to serve (declare them with @cronwarden.job)")
    return jobs


def notifiers_for(settings: HostSettings) -> list[Notifier]:
    """Every host's notifiers: a JSON log line, plus the webhook when one is configured."""
    notifiers: list[Notifier] = [LogNotifier()]
    if settings.webhook_url:
        notifiers.append(WebhookNotifier(settings.webhook_url))
    return notifiers


class Composition:
    """One host's object graph, built from configuration on first use and then reused.

    ``provider`` defaults to the one ``host.provider`` names (``provider_from_env``);
    ``notifiers`` to :func:`notifiers_for` ``host``; ``host`` to
    :meth:`HostSettings.from_env`, read when first needed.
    """

    def __init__(
        self,
        jobs: JobSet,
        *,
        provider: Provider | None = None,
        settings: EngineSettings | None = None,
        notifiers: list[Notifier] | None = None,
        host: HostSettings | None = None,
    ) -> None:
        self.jobs = jobs
        self.settings = settings
        self._provider = provider
        self._notifiers = notifiers
        self._host = host
        self._lock = threading.RLock()
        self._engine: Engine | None = None
        self._trigger: Trigger | None = None
        self._watcher: Watcher | None = None

    @property
    def host(self) -> HostSettings:
        with self._lock:
            if self._host is None:
                self._host = HostSettings.from_env()
            return self._host

    @property
    def provider(self) -> Provider:
        with self._lock:
            if self._provider is None:
                from ..config import provider_from_env

                self._provider = provider_from_env(self.host.provider)
            return self._provider

    @property
    def store(self) -> Store:
        return self.provider.store()

    @property
    def queue(self) -> Queue:
        return self.provider.queue()

    def run_queue(self) -> Publisher:
        """Where the trigger publishes run requests (hosts may require their cloud's kind)."""
        return self.queue

    @property
    def engine(self) -> Engine:
        with self._lock:
            if self._engine is None:
                self._engine = Engine(self.jobs, self.store, self.settings)
            return self._engine

    @property
    def trigger(self) -> Trigger:
        with self._lock:
            if self._trigger is None:
                self._trigger = Trigger(self.jobs, self.run_queue(), self.store)
            return self._trigger

    @property
    def notifiers(self) -> list[Notifier]:
        with self._lock:
            if self._notifiers is None:
                self._notifiers = notifiers_for(self.host)
            return self._notifiers

    @property
    def watcher(self) -> Watcher:
        """The watcher with :attr:`notifiers`. It uses the provider's queue for dead-letter
        depth, whatever its kind: a watcher may run in another cloud than its jobs."""
        with self._lock:
            if self._watcher is None:
                self._watcher = Watcher(
                    self.jobs, self.store, self.provider.queue(), notifiers=self.notifiers
                )
            return self._watcher

    def pull_worker(self) -> Worker:
        """A new pull worker on the provider's queue (its visibility: the lease TTL plus one
        renewal interval, applied once in :func:`~cronwarden.trigger.lease_visibility`)."""
        return Worker(self.engine, self.queue)

    def close(self) -> None:
        with self._lock:
            if self._provider is not None:
                self._provider.close()
