"""``python -m cronwarden.emulators.aws.server -H HOST -p PORT``: moto's server, with DynamoDB
calls serialised.

moto's server handles requests on threads, but its DynamoDB backend takes no lock:
``TransactWriteItems`` applies its items one by one and, when one fails, restores a copy of the
whole table taken before it started, which silently reverts the writes of any transaction that
ran in between (measured here: a fenced commit refused at a ledger item while the run record's
compare-and-set passed against a takeover that had been rolled back). DynamoDB itself
serialises transactions. One lock around every public DynamoDB backend method gives the
emulator the isolation the service has; SQS and the other services are left as they are.

S3 conditional writes (``PutObject`` / ``DeleteObject`` with ``If-Match`` / ``If-None-Match``)
are checked by moto's request handler and applied afterwards, without a lock: two racing
``If-None-Match: *`` puts could both pass the check and both "succeed" (not observed in
practice, but nothing rules it out; S3 itself lets exactly one win).
:func:`serialise_s3_conditional_writes` puts the check and the write under one lock.

moto also deep-copies every table a transaction touches before applying it (its rollback), so a
transaction costs time in proportion to the table's size (a 100-op ledger commit took seconds
on a table of a few thousand items). Under the lock, the same rollback needs only the items the
transaction touches: :func:`_transact_write_items` snapshots those, lets moto apply the
transaction without its table copies, and puts the touched items back when moto cancels it.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

_LOCK = threading.RLock()
_S3_LOCK = threading.Lock()  #: S3 writes wait for S3 writes only, not for DynamoDB


def _serialised(method: Callable[..., Any], lock: Any = _LOCK) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return method(*args, **kwargs)

    return call


class _NoTableCopies:
    """Stands in for the ``copy`` module inside moto's DynamoDB models while a transaction runs
    under the lock: tables are not copied (the touched items are, by the caller)."""

    def __init__(self, real: Any, table_type: type) -> None:
        self._real, self._table_type = real, table_type

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        if isinstance(value, self._table_type):
            return value
        return self._real.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _transact_write_items(original: Callable[..., Any]) -> Callable[..., Any]:
    import copy

    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    def transact(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        touched: list[tuple[str, dict[str, Any], Any]] = []
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            name = op.get("TableName")
            if not name or name not in self.tables:
                continue
            table = self.tables[name]
            if op_type == "Put":
                attrs = op.get("Item") or {}
                key = {table.hash_key_attr: attrs.get(table.hash_key_attr)}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs.get(table.range_key_attr)
            else:
                key = op.get("Key") or {}
            if any(v is None for v in key.values()):
                continue  # moto refuses it as invalid, before applying anything
            current = self.get_item(name, key)
            attributes = None if current is None else copy.deepcopy(current.to_json()["Attributes"])
            touched.append((name, key, attributes))
        models.__dict__["copy"] = _NoTableCopies(copy, Table)
        try:
            return original(self, transact_items)
        except Exception:
            for name, key, attributes in reversed(touched):  # what moto's copy restored
                if attributes is None:
                    with contextlib.suppress(Exception):
                        self.delete_item(name, key)
                else:
                    self.put_item(name, attributes)
            raise
        finally:
            models.__dict__["copy"] = copy

    return transact


def serialise_dynamodb() -> None:
    """Wrap every public method of moto's DynamoDB backend in one lock (idempotent), and make
    transactions roll back only the items they touched."""
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend, "_cronwarden_serialised", False):
        return
    DynamoDBBackend.transact_write_items = _transact_write_items(  # type: ignore[method-assign]
        DynamoDBBackend.transact_write_items
    )
    for name, value in list(vars(DynamoDBBackend).items()):
        if not name.startswith("_") and callable(value):
            setattr(DynamoDBBackend, name, _serialised(value))
    DynamoDBBackend._cronwarden_serialised = True  # type: ignore[attr-defined]


def serialise_s3_conditional_writes() -> None:
    """Run moto's S3 ``put_object`` and ``delete_object`` handlers (precondition check and
    write) under one lock (idempotent): the atomicity S3 gives a conditional write."""
    from moto.s3.responses import S3Response

    if getattr(S3Response, "_cronwarden_serialised", False):
        return
    S3Response.put_object = _serialised(S3Response.put_object, _S3_LOCK)  # type: ignore[method-assign]
    S3Response.delete_object = _serialised(S3Response.delete_object, _S3_LOCK)  # type: ignore[method-assign]
    S3Response._cronwarden_serialised = True  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> None:
    serialise_dynamodb()
    serialise_s3_conditional_writes()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
