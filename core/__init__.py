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

__version__ = "0.1.0"

_EXPORTS = {
    "job": "jobs",
    "Job": "jobs",
    "JobSet": "jobs",
    "Retry": "jobs",
    "CatchUp": "jobs",
    "Liveness": "jobs",
    "Overlap": "jobs",
    "Expect": "expect",
    "Schedule": "schedule",
    "RunContext": "context",
    "LedgerItem": "context",
    "Uncertain": "context",
    "RunRequest": "model",
    "RunState": "model",
    "run_key": "model",
    "Engine": "engine",
    "EngineSettings": "engine",
    "Outcome": "engine",
    "OutcomeKind": "engine",
    "Trigger": "trigger",
    "Worker": "trigger",
    "Watcher": "liveness",
    "Alert": "liveness",
    "Condition": "liveness",
    "LogNotifier": "notify",
    "WebhookNotifier": "notify",
    "LocalRunner": "runtime",
    "provider_from_env": "config",
    "load_jobs": "config",
    "register_secret": "redaction",
    "redact": "redaction",
    "CronwardenError": "errors",
    "InvalidJobDefinition": "errors",
    "LeaseLost": "errors",
    "Cancelled": "errors",
    "PermanentError": "errors",
    "FingerprintMismatch": "errors",
    "ConfigurationError": "errors",
    "run_command": "command",
    "consumer": "consumers",
    "publish": "consumers",
    "EventConsumer": "consumers",
    "MalformedEvent": "consumers",
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
    from .command import run_command
    from .config import load_jobs, provider_from_env
    from .consumers import EventConsumer, MalformedEvent, consumer, publish
    from .context import LedgerItem, RunContext, Uncertain
    from .engine import Engine, EngineSettings, Outcome, OutcomeKind
    from .errors import (
        Cancelled,
        ConfigurationError,
        CronwardenError,
        FingerprintMismatch,
        InvalidJobDefinition,
        LeaseLost,
        PermanentError,
    )
    from .expect import Expect
    from .jobs import CatchUp, Job, JobSet, Liveness, Overlap, Retry, job
    from .liveness import Alert, Condition, Watcher
    from .model import RunRequest, RunState, run_key
    from .notify import LogNotifier, WebhookNotifier
    from .redaction import redact, register_secret
    from .runtime import LocalRunner
    from .schedule import Schedule
    from .trigger import Trigger, Worker


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cronwarden' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
