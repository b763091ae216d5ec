"""The GCP provider: Firestore store, Pub/Sub queue (with dead-lettering), and the hosts that
run jobs on it: functions-framework ``trigger`` / ``worker`` / ``watcher`` functions
(:func:`make_functions`) and a pull worker for long-running hosts (:class:`PullWorkers`).

Importing this package imports no Google SDK; the clients (and ``google.cloud``) load when an
adapter first talks to its service. The function and worker modules load on first use. See
``docs/gcp.md`` for the layout and resources.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .provider import GcpProvider
from .queue import PubSubQueue, validate_max_deliveries
from .store import FirestoreStore

_LAZY = {
    "make_functions": "functions",
    "runtime_of": "functions",
    "FunctionsRuntime": "functions",
    "PushWorker": "functions",
    "PushQueue": "push",
    "PushReceipt": "push",
    "parse_envelope": "push",
    "MalformedEnvelope": "push",
    "parse_tick": "ticks",
    "PullWorkers": "serve",
}

if TYPE_CHECKING:
    from .functions import FunctionsRuntime, PushWorker, make_functions, runtime_of
    from .push import MalformedEnvelope, PushQueue, PushReceipt, parse_envelope
    from .serve import PullWorkers
    from .ticks import parse_tick

__all__ = [
    "FirestoreStore",
    "FunctionsRuntime",
    "GcpProvider",
    "MalformedEnvelope",
    "PubSubQueue",
    "PullWorkers",
    "PushQueue",
    "PushReceipt",
    "PushWorker",
    "make_functions",
    "parse_envelope",
    "parse_tick",
    "runtime_of",
    "validate_max_deliveries",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
