"""cronwarden: scheduled serverless jobs that run once per window, never overlap and never fail
silently, on the embedded local provider, GCP or Azure.

The public API is small and loaded lazily, so ``import cronwarden`` costs little on a cold start
and never imports a cloud SDK::

    import cronwarden

    @cronwarden.job("nightly-export", cron="0 2 * * *", timezone="Europe/Berlin",
                    max_runtime="30m", overlap="skip", retry=cronwarden.Retry(max_attempts=5))
    def nightly_export(ctx: cronwarden.RunContext) -> None:
        for item in ctx.items(customers(), key="id"):
            send_report(item.value, idempotency_key=item.idempotency_key)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _aliases

__version__ = "0.1.0"

_aliases.install()  # the module paths from before the layers keep working

_EXPORTS = {
    "job": "jobs.definitions",
    "Job": "jobs.definitions",
    "JobSet": "jobs.definitions",
    "Retry": "jobs.definitions",
    "CatchUp": "jobs.definitions",
    "Liveness": "jobs.definitions",
    "Overlap": "jobs.definitions",
    "Expect": "jobs.expect",
    "Schedule": "model.schedule",
    "RunContext": "run.context",
    "LedgerItem": "run.context",
    "Uncertain": "run.context",
    "RunRequest": "model.runs",
    "RunState": "model.runs",
    "run_key": "model.runs",
    "Engine": "run.engine",
    "EngineSettings": "run.engine",
    "Outcome": "model.settlement",
    "OutcomeKind": "model.settlement",
    "Trigger": "hosting.trigger",
    "Worker": "hosting.trigger",
    "Watcher": "watch.watcher",
    "Alert": "watch.health",
    "Condition": "watch.health",
    "LogNotifier": "watch.notify",
    "WebhookNotifier": "watch.notify",
    "LocalRunner": "hosting.runtime",
    "provider_from_env": "jobs.config",
    "load_jobs": "jobs.config",
    "register_secret": "model.redaction",
    "redact": "model.redaction",
    "CronwardenError": "model.errors",
    "InvalidJobDefinition": "model.errors",
    "LeaseLost": "model.errors",
    "Cancelled": "model.errors",
    "PermanentError": "model.errors",
    "FingerprintMismatch": "model.errors",
    "ConfigurationError": "model.errors",
    "run_command": "jobs.command",
    "consumer": "jobs.consumers",
    "publish": "jobs.consumers",
    "EventConsumer": "jobs.consumers",
    "MalformedEvent": "jobs.consumers",
}

__all__ = [
    "Alert",
    "Cancelled",
    "CatchUp",
    "Condition",
    "ConfigurationError",
    "CronwardenError",
    "Engine",
    "EngineSettings",
    "EventConsumer",
    "Expect",
    "FingerprintMismatch",
    "InvalidJobDefinition",
    "Job",
    "JobSet",
    "LeaseLost",
    "LedgerItem",
    "Liveness",
    "LocalRunner",
    "LogNotifier",
    "MalformedEvent",
    "Outcome",
    "OutcomeKind",
    "Overlap",
    "PermanentError",
    "Retry",
    "RunContext",
    "RunRequest",
    "RunState",
    "Schedule",
    "Trigger",
    "Uncertain",
    "Watcher",
    "WebhookNotifier",
    "Worker",
    "consumer",
    "job",
    "load_jobs",
    "provider_from_env",
    "publish",
    "redact",
    "register_secret",
    "run_command",
    "run_key",
]

if TYPE_CHECKING:
    from .hosting.runtime import LocalRunner
    from .hosting.trigger import Trigger, Worker
    from .jobs.command import run_command
    from .jobs.config import load_jobs, provider_from_env
    from .jobs.consumers import EventConsumer, MalformedEvent, consumer, publish
    from .jobs.definitions import CatchUp, Job, JobSet, Liveness, Overlap, Retry, job
    from .jobs.expect import Expect
    from .model.errors import (
        Cancelled,
        ConfigurationError,
        CronwardenError,
        FingerprintMismatch,
        InvalidJobDefinition,
        LeaseLost,
        PermanentError,
    )
    from .model.redaction import redact, register_secret
    from .model.runs import RunRequest, RunState, run_key
    from .model.schedule import Schedule
    from .model.settlement import Outcome, OutcomeKind
    from .run.context import LedgerItem, RunContext, Uncertain
    from .run.engine import Engine, EngineSettings
    from .watch.health import Alert, Condition
    from .watch.notify import LogNotifier, WebhookNotifier
    from .watch.watcher import Watcher


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cronwarden' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
