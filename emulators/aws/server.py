"""``python -m cronwarden.emulators.aws.server -H HOST -p PORT``: moto's server, with DynamoDB
calls serialised.

moto's server handles requests on threads, but its DynamoDB backend takes no lock:
``TransactWriteItems`` applies its items one by one and, when one fails, restores a copy of the
whole table taken before it started, which silently reverts the writes of any transaction that
ran in between (measured here: a fenced commit refused at a ledger item while the run record's
compare-and-set passed against a takeover that had been rolled back). DynamoDB itself
serialises transactions. One lock around every public DynamoDB backend method gives the
emulator the isolation the service has; SQS and the other services are left as they are.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

_LOCK = threading.RLock()


def _serialised(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return method(*args, **kwargs)

    return call


def serialise_dynamodb() -> None:
    """Wrap every public method of moto's DynamoDB backend in one lock (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend, "_cronwarden_serialised", False):
        return
    for name, value in list(vars(DynamoDBBackend).items()):
        if not name.startswith("_") and callable(value):
            setattr(DynamoDBBackend, name, _serialised(value))
    DynamoDBBackend._cronwarden_serialised = True  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> None:
    serialise_dynamodb()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
