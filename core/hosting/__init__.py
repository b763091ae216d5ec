"""Host plumbing: the composition root, host settings, serverless and pull hosts.

Job authors never need this namespace; hosts (``cronwarden run``, the pull workers, the GCP
functions, the Azure app) are built on it.
"""

from __future__ import annotations

from .root import Composition, jobset_of, notifiers_for
from .serverless import HostedRuntime
from .settings import (
    FUNCTION_NAMES,
    FUNCTIONS_ENV,
    JOBS_ENV,
    PROVIDER_ENV,
    WEBHOOK_ENV,
    HostSettings,
    enabled_functions,
)


def __getattr__(name: str) -> object:
    if name == "PullWorkers":  # lazy: signal handling and threads only when asked for
        from .pull import PullWorkers

        return PullWorkers
    raise AttributeError(name)


__all__ = [
    "FUNCTIONS_ENV",
    "FUNCTION_NAMES",
    "JOBS_ENV",
    "PROVIDER_ENV",
    "WEBHOOK_ENV",
    "Composition",
    "HostSettings",
    "HostedRuntime",
    "PullWorkers",
    "enabled_functions",
    "jobset_of",
    "notifiers_for",
]
