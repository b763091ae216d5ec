"""Layer 5, ``hosting``: what drives runs and watchers.

The trigger and the worker (:mod:`.trigger`: schedule ticks become run requests on a queue,
deliveries become engine runs and verdicts), the local runner (:mod:`.runtime`), the composition
root that wires a provider, jobs, the watcher and its notifiers for every host (:mod:`.root`),
the serverless and pull hosts (:mod:`.serverless`, :mod:`.pull`) and host settings
(:mod:`.settings`).

May import: :mod:`cronwarden.watch`, :mod:`cronwarden.run`, :mod:`cronwarden.jobs`,
:mod:`cronwarden.model` and its own modules. Job authors never need this namespace; hosts
(``cronwarden run``, the pull workers, the GCP functions, the Azure app) are built on it.
Importing it loads nothing until a name is asked for, so ``cronwarden.hosting.trigger`` costs
no more than the trigger itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .pull import PullWorkers
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

_EXPORTS = {
    "Composition": "root",
    "jobset_of": "root",
    "notifiers_for": "root",
    "HostedRuntime": "serverless",
    "PullWorkers": "pull",  # signal handling and threads only when asked for
    "FUNCTION_NAMES": "settings",
    "FUNCTIONS_ENV": "settings",
    "JOBS_ENV": "settings",
    "PROVIDER_ENV": "settings",
    "WEBHOOK_ENV": "settings",
    "HostSettings": "settings",
    "enabled_functions": "settings",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


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
