"""What every serverless host binding shares: the jobs to serve, which functions are enabled,
and the engine, trigger and watcher, built lazily once per instance (cold starts stay cheap:
nothing connects before the first invocation).

The GCP functions (``cronwarden.adapters.gcp.functions``) and the Azure function app
(``cronwarden.adapters.azure.functions``) subclass :class:`HostedRuntime` and add their
transport: the queue the trigger publishes to (:meth:`HostedRuntime.run_queue`) and how a
delivery reaches the core ``Worker``.
"""

from __future__ import annotations

import abc
import os
import threading
from collections.abc import Mapping
from types import ModuleType

from .engine import Engine, EngineSettings
from .errors import ConfigurationError
from .jobs import JobSet
from .liveness import Watcher
from .notify import LogNotifier, Notifier, WebhookNotifier
from .ports import Provider, Queue
from .trigger import Trigger

FUNCTIONS_ENV = "CRONWARDEN_FUNCTIONS"  #: comma list of the functions an app answers
WEBHOOK_ENV = "CRONWARDEN_WEBHOOK_URL"  #: the watcher's webhook (a credential: never logged)
FUNCTION_NAMES = ("trigger", "worker", "watcher")


def jobset_of(target: ModuleType | JobSet | str) -> JobSet:
    """The jobs of a module, a ``JobSet``, or a module name / path; refuses an empty set."""
    if isinstance(target, JobSet):
        jobs = target
    elif isinstance(target, ModuleType):
        jobs = JobSet.from_module(target)
    else:
        from .config import load_jobs

        return load_jobs(target)
    if not len(jobs):
        raise ConfigurationError("no jobs to serve (declare them with @cronwarden.job)")
    return jobs


def enabled_functions(env: Mapping[str, str] | None = None) -> set[str]:
    """The functions ``$CRONWARDEN_FUNCTIONS`` enables (all when unset); unknown names refused."""
    raw = (os.environ if env is None else env).get(FUNCTIONS_ENV, "")
    chosen = {part.strip().lower() for part in raw.split(",") if part.strip()}
    unknown = chosen - set(FUNCTION_NAMES)
    if unknown:
        raise ConfigurationError(
            f"${FUNCTIONS_ENV}: unknown function(s) {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(FUNCTION_NAMES)}"
        )
    return chosen or set(FUNCTION_NAMES)


class HostedRuntime(abc.ABC):
    """What a host's functions share; built lazily, once per instance, thread-safe."""

    def __init__(
        self,
        jobs: JobSet,
        *,
        provider: Provider | None = None,
        settings: EngineSettings | None = None,
        notifiers: list[Notifier] | None = None,
    ) -> None:
        self.jobs = jobs
        self.settings = settings
        self._provider = provider
        self._notifiers = notifiers
        self._lock = threading.RLock()
        self._engine: Engine | None = None
        self._trigger: Trigger | None = None
        self._watcher: Watcher | None = None

    @abc.abstractmethod
    def run_queue(self) -> Queue:
        """The queue run requests travel on (checked to be this host's kind)."""

    @property
    def provider(self) -> Provider:
        with self._lock:
            if self._provider is None:
                from .config import provider_from_env

                self._provider = provider_from_env()
            return self._provider

    @property
    def engine(self) -> Engine:
        with self._lock:
            if self._engine is None:
                self._engine = Engine(self.jobs, self.provider.store(), self.settings)
            return self._engine

    @property
    def trigger(self) -> Trigger:
        with self._lock:
            if self._trigger is None:
                self._trigger = Trigger(self.jobs, self.run_queue(), self.provider.store())
            return self._trigger

    @property
    def watcher(self) -> Watcher:
        """The watcher, with the given notifiers, or a log line plus ``$CRONWARDEN_WEBHOOK_URL``.

        It uses the provider's queue for dead-letter depth, whatever its kind: a watcher may
        run in another cloud than the jobs it watches."""
        with self._lock:
            if self._watcher is None:
                notifiers = self._notifiers
                if notifiers is None:
                    notifiers = [LogNotifier()]
                    url = os.environ.get(WEBHOOK_ENV)
                    if url:
                        notifiers.append(WebhookNotifier(url))
                self._watcher = Watcher(
                    self.jobs, self.provider.store(), self.provider.queue(), notifiers=notifiers
                )
            return self._watcher

    def close(self) -> None:
        with self._lock:
            if self._provider is not None:
                self._provider.close()
