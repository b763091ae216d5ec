"""The composition root: configuration → provider → store, queue, engine, trigger, worker,
watcher, notifiers, watcher hooks and per-job pings, the same way for every host.

``LocalRunner`` (``cronwarden run``), the pull workers (:mod:`cronwarden.hosting.pull`), the GCP
functions and the Azure function app all build their object graph through :class:`Composition`;
hosts differ only in how deliveries reach :meth:`~cronwarden.hosting.trigger.Worker.decide` and how
they apply its verdict. Everything is built lazily, once, thread-safe: a cold start connects
nothing before the first invocation.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from ..jobs.definitions import JobSet
from ..model.errors import ConfigurationError
from ..model.ports import Provider, Publisher, Queue, Store
from .settings import WEBHOOK_ENV, HostSettings

# The engine, trigger, watcher and notifiers load when first built, not at import: a function
# host imports this module at its cold start, and each of its functions needs only some of them
# (a worker never builds the watcher, a watcher never builds the engine).
if TYPE_CHECKING:
    from ..run.engine import Engine, EngineSettings
    from ..watch.alerting.settings import AlertingSettings
    from ..watch.alerting.watchdog import CheckHook, JobPingHandler, JobPings
    from ..watch.notify import Notifier
    from ..watch.watcher import Watcher
    from .trigger import Trigger, Worker


def jobset_of(target: ModuleType | JobSet | str) -> JobSet:
    """The jobs of a module, a ``JobSet``, or a module name / path; refuses an empty set."""
    if isinstance(target, JobSet):
        jobs = target
    elif isinstance(target, ModuleType):
        jobs = JobSet.from_module(target)
    else:
        from ..jobs.config import load_jobs

        return load_jobs(target)
    if not len(jobs) and not jobs.consumers:
        raise ConfigurationError("no jobs to serve (declare them with @cronwarden.job)")
    return jobs


def notifiers_for(settings: HostSettings) -> list[Notifier]:
    """A JSON log line, plus the webhook when one is configured: the notifiers of a host
    without an alerting settings file (with one, :func:`alerting_for`'s router)."""
    from ..watch.notify import LogNotifier, WebhookNotifier

    notifiers: list[Notifier] = [LogNotifier()]
    if settings.webhook_url:
        notifiers.append(WebhookNotifier(settings.webhook_url))
    return notifiers


def alerting_for(settings: HostSettings, env: Mapping[str, str] | None = None) -> AlertingSettings:
    """The host's alerting settings (``cronwarden.watch.alerting``: the settings file or
    ``$CRONWARDEN_ALERTING_TOML``, plus ``$CRONWARDEN_WEBHOOK_URL`` and the heartbeat URL).

    ``settings.webhook_url`` stands for ``$CRONWARDEN_WEBHOOK_URL`` (a host given its settings
    explicitly keeps its webhook); it becomes the ``webhook`` channel exactly once, unless the
    settings file declares a channel of that name itself.
    """
    from ..watch.alerting.settings import load_settings

    environ = dict(os.environ if env is None else env)
    if settings.webhook_url:
        environ[WEBHOOK_ENV] = settings.webhook_url
    else:
        environ.pop(WEBHOOK_ENV, None)
    return load_settings(env=environ)


class Composition:
    """One host's object graph, built from configuration on first use and then reused.

    ``provider`` defaults to the one ``host.provider`` names (``provider_from_env``);
    ``notifiers`` to the router of :func:`alerting_for` ``host`` (the log line plus every
    routed channel, each alert sent once per channel; without a settings file, the log line
    and ``$CRONWARDEN_WEBHOOK_URL`` as :func:`notifiers_for`); ``hooks`` (run after every watcher
    check) to its :meth:`~cronwarden.watch.alerting.settings.AlertingSettings.watcher_hooks` (the
    store heartbeat, plus the dead-man's switch when configured); ``host`` to
    :meth:`HostSettings.from_env`, read when first needed.

    Per-job pings (``[alerting] job_pings``) are installed with the engine: every host that runs
    jobs builds its engine here, so every such host pings. :meth:`close` waits for the pings
    sent so far and removes the handler.
    """

    def __init__(
        self,
        jobs: JobSet,
        *,
        provider: Provider | None = None,
        settings: EngineSettings | None = None,
        notifiers: list[Notifier] | None = None,
        host: HostSettings | None = None,
        hooks: list[CheckHook] | None = None,
    ) -> None:
        self.jobs = jobs
        self.settings = settings
        self._provider = provider
        self._notifiers = notifiers
        self._host = host
        self._hooks = hooks
        self._alerting: AlertingSettings | None = None
        self._lock = threading.RLock()
        self._engine: Engine | None = None
        self._trigger: Trigger | None = None
        self._watcher: Watcher | None = None
        self._ping_handler: JobPingHandler | None = None

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
                from ..jobs.config import provider_from_env

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
                from ..run.engine import Engine

                self._install_pings()
                self._engine = Engine(self.jobs, self.store, self.settings)
            return self._engine

    @property
    def job_pings(self) -> JobPings | None:
        """The per-job pings of the alerting settings (None when none are configured)."""
        return self.alerting.job_pings

    def _install_pings(self) -> None:
        """Attach the ping handler to the engine's log events, once per composition."""
        pings = self.job_pings
        if pings is not None and self._ping_handler is None:
            from ..watch.alerting.watchdog import JobPingHandler

            self._ping_handler = JobPingHandler(pings).install()

    def flush_pings(self, timeout: float = 30.0) -> None:
        """Wait for the job pings sent so far (a host calls it before its process may freeze:
        after an invocation, before exit)."""
        handler = self._ping_handler
        if handler is not None:
            handler.pings.flush(timeout)

    @property
    def trigger(self) -> Trigger:
        with self._lock:
            if self._trigger is None:
                from .trigger import Trigger

                self._trigger = Trigger(self.jobs, self.run_queue(), self.store)
            return self._trigger

    @property
    def alerting(self) -> AlertingSettings:
        """The alerting settings, loaded once (a bad setting raises ``ConfigurationError``)."""
        with self._lock:
            if self._alerting is None:
                self._alerting = alerting_for(self.host)
            return self._alerting

    @property
    def notifiers(self) -> list[Notifier]:
        with self._lock:
            if self._notifiers is None:
                alerting = self.alerting
                if alerting.source == "environment":
                    # No settings file: the only channel is $CRONWARDEN_WEBHOOK_URL, which the
                    # plain pair delivers identically (same body, same log line).
                    self._notifiers = notifiers_for(self.host)
                else:
                    self._notifiers = [alerting.router()]
            return self._notifiers

    @property
    def hooks(self) -> list[CheckHook]:
        with self._lock:
            if self._hooks is None:
                self._hooks = self.alerting.watcher_hooks()
            return self._hooks

    @property
    def watcher(self) -> Watcher:
        """The watcher with :attr:`notifiers`. It uses the provider's queue for dead-letter
        depth, whatever its kind: a watcher may run in another cloud than its jobs."""
        with self._lock:
            if self._watcher is None:
                from ..watch.watcher import Watcher

                hooks = list(self.hooks)
                if any(job.after for job in self.jobs):
                    from ..run.dependencies import OutboxSweep

                    # completion events a crash left in the outbox, published after each check
                    hooks.append(OutboxSweep(self.jobs, self.run_queue))
                self._watcher = Watcher(
                    self.jobs,
                    self.store,
                    self.provider.queue(),
                    notifiers=self.notifiers,
                    hooks=hooks,
                )
            return self._watcher

    def pull_worker(self) -> Worker:
        """A new pull worker on the provider's queue (its visibility: the lease TTL plus one
        renewal interval, applied once in :func:`~cronwarden.hosting.trigger.lease_visibility`)."""
        from .trigger import Worker

        return Worker(self.engine, self.queue)

    def close(self) -> None:
        """Send the pending job pings, detach the ping handler, close the provider."""
        with self._lock:
            handler, self._ping_handler = self._ping_handler, None
            if handler is not None:
                from ..model.logs import get_logger

                get_logger().removeHandler(handler)
                handler.pings.close()
            if self._provider is not None:
                self._provider.close()
