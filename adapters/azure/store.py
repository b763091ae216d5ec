"""Azure Table Storage implementation of the :class:`~cronwarden.model.ports.Store` port.

Layout (see :mod:`._keys`): one table; ``PartitionKey`` = the job name, ``RowKey`` =
``kind:id``. All records of one job share a partition, so every commit (which the port limits
to one job) is a single **entity-group transaction** (``submit_transaction``): atomic, at most
100 operations, one HTTP round trip.

Operations:

* ``Create`` → transaction ``create``: an existing entity fails it → ``CommitConflict("exists")``.
* ``Update`` → ``update`` in *replace* mode with ``If-Match: <ETag>``; ``Delete`` → ``delete``
  with ``If-Match``. A changed or missing entity fails it → ``CommitConflict("version")``.
  The service reports the failing operation's index, which becomes ``CommitConflict.index``.
* ``Merge`` of plain ``fields`` → ``upsert`` in *merge* mode: no read, no precondition.
* ``Merge`` with ``increments`` / ``maximums``: Table Storage has no atomic increment, so the
  record is read first (one extra round trip per such Merge, counted in ``round_trips``) and
  written back with ``If-Match`` on the ETag read (or ``create`` when it was missing), inside
  the same transaction as the other ops. If *that* precondition fails (a concurrent writer),
  the whole commit is retried with a fresh read, at most :attr:`TableStore.merge_attempts`
  times; nothing is applied by a failed attempt. Prefer plain fields on hot paths.

Versions are ETags (``W/"datetime'…'"``), which change on every write. Queries of one job scan
one partition; queries across jobs filter on the ``RowKey`` range of the kind and therefore scan
the table (each result page is counted as a round trip).

``query_due`` (the watcher's question) is a **documented bound**, not an index: Table Storage
indexes only ``(PartitionKey, RowKey)``, and a sorted index across jobs would need a partition
shared by every job, which no commit of one job could update in its own entity-group
transaction (the port's atomicity rests on that). An index entity per job in the job's own
partition would not help: a ``RowKey`` range across partitions is itself a scan. So the due
query is the status ``RowKey`` range with a server-side filter on the two ``Edm.Int64``
properties ``due_at`` / ``watch_due``: the service scans the table, but only the due status
records cross the network and are decoded (billed per result page, usually one).

The Azure SDK is imported when a store is built, never by ``import cronwarden``.
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    ConfigurationError,
    StoreUnavailable,
)
from cronwarden.model.ports import (
    DUE_FIELDS,
    STATUS,
    Create,
    Delete,
    Key,
    Merge,
    Op,
    Record,
    Store,
    StoreCapabilities,
    Update,
    Version,
    apply_merge,
    due_of,
    merged_fields,
)

from . import _entity, _keys
from ._redact import redact

if TYPE_CHECKING:
    from azure.data.tables import TableClient

DEFAULT_TABLE = "cronwarden"
_PAGE_MAX = 1000  #: the service's largest page
_EXISTS = frozenset({"EntityAlreadyExists"})
_VERSION = frozenset({"UpdateConditionNotSatisfied", "ResourceNotFound", "ConditionNotMet"})
_TABLE_NOT_FOUND = "TableNotFound"
_ETAG = re.compile(r'^(W/)?"[^"]*"$')  #: what the service hands out as entity versions
_NEVER = "W/\"datetime'1601-01-01T00%3A00%3A00.0000000Z'\""  #: no entity was written then
_TABLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]{2,62}$")
_T = TypeVar("_T")


class TableStore(Store):
    """Records in one Azure Table (or an Azurite table); see the module doc for the layout.

    ``table`` is an ``azure.data.tables.TableClient``; the table is created if missing unless
    ``create_table=False``. Use :meth:`from_connection_string` or :meth:`from_account_url`.
    Thread-safe: one store may be shared by the threads of a worker.
    """

    #: 100: the entity-group transaction limit (Azurite breaks above it). No atomic increment
    #: or maximum: such a Merge reads the entity first (one more round trip, counted).
    capabilities = StoreCapabilities(
        max_commit_ops=100,
        atomic_increment=False,
        atomic_maximum=False,
        native_types=(datetime,),  #: aware datetimes as Edm.DateTime (see ._entity)
        #: a page's ``keys`` / ``fps`` lists are one Edm.Binary property each (64 KiB limit)
        max_page_bytes=60_000,
        #: a string property holds 64 KiB of UTF-16: 32,000 bytes of UTF-8 always fit
        max_text_bytes=32_000,
    )
    merge_attempts = 30  #: tries of a commit whose Merge increments keep losing races

    def __init__(self, table: TableClient, *, create_table: bool = True) -> None:
        super().__init__()
        if not _TABLE_NAME.match(str(table.table_name)):
            raise ConfigurationError(
                f"table name {table.table_name!r}: Azure needs 3-63 letters and digits, "
                "starting with a letter"
            )
        self._table = table
        self._closed = False
        self._close_lock = threading.Lock()
        if create_table:
            self._call(self._create_table)

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_connection_string(
        cls, connection_string: str, table: str = DEFAULT_TABLE, **options: Any
    ) -> TableStore:
        """A store on ``table`` of the account in ``connection_string`` (Azurite or Azure).

        ``options`` go to ``TableClient`` (e.g. ``connection_timeout``) and ``create_table``
        to the constructor. Errors never echo the account key.
        """
        from azure.data.tables import TableClient

        create_table = bool(options.pop("create_table", True))
        try:
            client = TableClient.from_connection_string(
                connection_string, table_name=table, **options
            )
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"invalid Table Storage connection string: {redact(str(exc))}"
            ) from None
        return cls(client, create_table=create_table)

    @classmethod
    def from_account_url(
        cls, account_url: str, credential: Any, table: str = DEFAULT_TABLE, **options: Any
    ) -> TableStore:
        """A store on ``table`` at ``account_url`` with an SDK ``credential``
        (``AzureNamedKeyCredential``, ``AzureSasCredential`` or a token credential)."""
        from azure.data.tables import TableClient

        create_table = bool(options.pop("create_table", True))
        try:
            client = TableClient(account_url, table, credential=credential, **options)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"invalid Table Storage account URL: {redact(str(exc))}"
            ) from None
        return cls(client, create_table=create_table)

    @property
    def table_name(self) -> str:
        return str(self._table.table_name)

    def _create_table(self) -> None:
        from azure.core.exceptions import ResourceExistsError

        with contextlib.suppress(ResourceExistsError):
            self._table.create_table()

    # -- reads -----------------------------------------------------------------------------
    def _get(self, key: Key) -> Record | None:
        entity = self._call(self._read, key.job, key.kind, key.id)
        return None if entity is None else _record(key, entity)

    def _read(self, job: str, kind: str, record_id: str) -> Any:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return self._table.get_entity(_keys.partition_key(job), _keys.row_key(kind, record_id))
        except ResourceNotFoundError as exc:
            if _error_code(exc) == _TABLE_NOT_FOUND:
                raise
            return None

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:
        clauses, params = _filter(kind, job, prefix, start, end)
        if limit is not None and limit <= 0:
            return []
        page_size = _PAGE_MAX if limit is None else min(limit, _PAGE_MAX)

        def run() -> list[Record]:
            pages = self._table.query_entities(
                " and ".join(clauses), parameters=params, results_per_page=page_size
            ).by_page()
            found: list[Record] = []
            for number, page in enumerate(pages):
                if number:  # every further page is one more request to the service
                    self._round_trip("read", kind)
                for entity in page:
                    found.append(_record(_key_of(entity), entity))
                if limit is not None and len(found) >= limit:
                    break
            found.sort(key=lambda r: (r.key.job, r.key.id))
            return found if limit is None else found[:limit]

        return self._call(run)

    def _query_due(self, before: int) -> list[Record]:
        """The status records' ``RowKey`` range filtered by the service on the due fields (a
        server-side scan: see the module docs); each result page is one round trip."""
        clauses, params = _filter(STATUS, None, "", None, None)
        # Int64 literals (suffix L): the properties are Edm.Int64, and an Int32 literal would
        # compare as another type; ``before`` is an int, never text from outside
        due = " or ".join(f"{name} le {int(before)}L" for name in DUE_FIELDS)
        query = " and ".join(clauses) + f" and ({due})"

        def run() -> list[Record]:
            pages = self._table.query_entities(
                query, parameters=params, results_per_page=_PAGE_MAX
            ).by_page()
            found: list[Record] = []
            for number, page in enumerate(pages):
                self._round_trip("query" if not number else "read", STATUS)
                found.extend(_record(_key_of(entity), entity) for entity in page)
            # Azurite compares a text property with a number loosely ("100" le 200L): the
            # port's rule (integers only) is applied to what came back
            return [r for r in found if (due := due_of(r.data)) is not None and due <= before]

        return self._call(run)

    # -- commits ---------------------------------------------------------------------------
    def _commit(self, ops: list[Op]) -> list[Version]:
        partition = _keys.partition_key(ops[0].key.job)
        planned: list[tuple[Any, ...] | None] = []
        reads: dict[int, tuple[str, Merge]] = {}
        for index, op in enumerate(ops):  # distinct records of one job: checked by the port
            row = _keys.row_key(op.key.kind, op.key.id)
            if isinstance(op, Merge) and (op.increments or op.maximums):
                reads[index] = (row, op)
                planned.append(None)
            else:
                planned.append(_plan(op, partition, row))
        for attempt in range(self.merge_attempts):
            operations = list(planned)
            if reads:
                for index, (row, merge) in reads.items():
                    self._round_trip("read", merge.key.kind)  # this Merge's read
                    current = self._call(self._read, merge.key.job, merge.key.kind, merge.key.id)
                    operations[index] = _plan_read_merge(partition, row, merge, current)
            if attempt:
                self._round_trip("commit", ops[0].key.kind, len(ops))  # a retried transaction
            try:
                results = self._call(self._submit, operations, set(reads), write=True)
            except _RetryMerge:
                _backoff(attempt)
                continue
            return [
                None if isinstance(op, Delete) else result.get("etag")
                for op, result in zip(ops, results, strict=True)
            ]
        raise StoreUnavailable(
            f"Merge increments on job {ops[0].key.job!r} lost {self.merge_attempts} races in a "
            "row; nothing was applied"
        )

    def _submit(self, operations: list[Any], retryable: set[int]) -> list[Mapping[str, Any]]:
        """Send the operations as one transaction, or a lone create/update/upsert as a plain
        request (same semantics, a third of the SDK's CPU cost per commit). A lone delete stays
        a transaction: the SDK's ``delete_entity`` hides a 404, which must fail the commit."""
        from azure.core.exceptions import ResourceExistsError, ResourceModifiedError
        from azure.core.exceptions import ResourceNotFoundError as NotFound
        from azure.data.tables import TableTransactionError

        try:
            if len(operations) == 1 and operations[0][0] != "delete":
                return [self._single(*operations[0])]
            return list(self._table.submit_transaction(operations))
        except (TableTransactionError, ResourceExistsError, ResourceModifiedError) as exc:
            raise _conflict(exc, operations, retryable) from None
        except NotFound as exc:
            if _error_code(exc) == _TABLE_NOT_FOUND:
                raise
            raise _conflict(exc, operations, retryable) from None

    def _single(self, kind: str, entity: Any, options: Any = None) -> Mapping[str, Any]:
        action = {
            "create": self._table.create_entity,
            "update": self._table.update_entity,
            "upsert": self._table.upsert_entity,
        }[kind]
        return dict(action(entity, **(options or {})))

    # -- plumbing --------------------------------------------------------------------------
    def _call(self, action: Callable[..., _T], *args: Any, write: bool = False) -> _T:
        """``action(*args)``, with the SDK's failures mapped to the port's errors: a request
        never sent (connection refused, DNS) or refused before applying (503 server busy, 429
        throttled) → StoreUnavailable; for a ``write``, a response lost after sending or a
        server error/timeout (500 incl. OperationTimedOut, 502, 504, 408) →
        CommitOutcomeUnknown (reads: StoreUnavailable); a missing table → ConfigurationError."""
        from azure.core.exceptions import (
            HttpResponseError,
            ServiceRequestError,
            ServiceResponseError,
        )

        if self._closed:
            raise StoreUnavailable("the store is closed")
        try:
            return action(*args)
        except ServiceRequestError as exc:
            raise StoreUnavailable(
                f"Table Storage unreachable ({type(exc).__name__}): {redact(str(exc))[:300]}"
            ) from None
        except ServiceResponseError as exc:
            failure = CommitOutcomeUnknown if write else StoreUnavailable
            raise failure(
                f"Table Storage unreachable ({type(exc).__name__}): {redact(str(exc))[:300]}"
            ) from None
        except HttpResponseError as exc:
            status = getattr(exc, "status_code", None)
            if status in _TRANSIENT and _error_code(exc) != _TABLE_NOT_FOUND:
                applied = write and status not in _REFUSED_BEFORE_APPLYING
                failure = CommitOutcomeUnknown if applied else StoreUnavailable
                raise failure(
                    f"Table Storage answered {status} ({_error_code(exc) or 'no code'}): "
                    f"{redact(str(exc))[:300]}"
                ) from None
            if _error_code(exc) != _TABLE_NOT_FOUND:
                raise
            raise ConfigurationError(
                f"table {self.table_name!r} does not exist: create it, or build the store "
                "with create_table=True"
            ) from None

    def close(self) -> None:
        with self._close_lock:
            if not self._closed:
                self._closed = True
                self._table.close()


class _RetryMerge(Exception):
    """A read-then-write Merge lost a race; retry the whole commit."""


def _conditional(version: Version) -> dict[str, Any]:
    from azure.core import MatchConditions

    return {"etag": version, "match_condition": MatchConditions.IfNotModified}


def _plan(op: Op, partition: str, row: str) -> tuple[Any, ...]:
    from azure.data.tables import UpdateMode

    if isinstance(op, Create):
        return ("create", _entity.build_entity(partition, row, op.data))
    if isinstance(op, Update | Delete):
        # A version that is no ETag (e.g. from another backend) can never match; send one that
        # never matches either, so the service reports the *first* failing op, as it should.
        version = op.version if isinstance(op.version, str) and _ETAG.match(op.version) else _NEVER
        if isinstance(op, Delete):
            return ("delete", {"PartitionKey": partition, "RowKey": row}, _conditional(version))
        entity = _entity.build_entity(partition, row, op.data)
        return ("update", entity, {"mode": UpdateMode.REPLACE, **_conditional(version)})
    assert isinstance(op, Merge)
    properties, size = _entity.encode_fields(op.fields)
    _entity.check_entity(partition, row, len(properties), size)
    return (
        "upsert",
        {"PartitionKey": partition, "RowKey": row, **properties},
        {"mode": UpdateMode.MERGE},
    )


def _plan_read_merge(partition: str, row: str, op: Merge, current: Any) -> tuple[Any, ...]:
    """The conditional write of a Merge with increments, given the entity read (or None)."""
    from azure.data.tables import UpdateMode

    existing = _entity.decode_entity(current) if current is not None else None
    data = apply_merge(existing, op)
    changed = merged_fields(existing, op)
    whole = _entity.build_entity(partition, row, data)  # checks the merged record's limits
    if current is None:
        return ("create", whole)
    properties, _ = _entity.encode_fields(changed)
    return (
        "update",
        {"PartitionKey": partition, "RowKey": row, **properties},
        {"mode": UpdateMode.MERGE, **_conditional(current.metadata["etag"])},
    )


#: statuses of a transient failure (not a refusal of the commit's preconditions)
_TRANSIENT = (408, 429, 500, 502, 503, 504)
#: transient statuses the service sends before applying anything (busy, throttled)
_REFUSED_BEFORE_APPLYING = (429, 503)


def _conflict(exc: Any, operations: list[Any], retryable: set[int]) -> Exception:
    """Map a failed transaction to CommitConflict, _RetryMerge (when the failing op is a
    read-then-write Merge, index in ``retryable``), or the SDK error itself."""
    index = int(getattr(exc, "index", 0) or 0)
    code = _error_code(exc)
    status = getattr(exc, "status_code", None)
    if code in _EXISTS or (not code and status == 409):
        reason = "exists"
    elif code in _VERSION or (not code and status in (404, 412)):
        reason = "version"
    else:
        return exc if isinstance(exc, Exception) else RuntimeError(str(exc))
    if not 0 <= index < len(operations):
        return exc if isinstance(exc, Exception) else RuntimeError(str(exc))
    if index in retryable:
        return _RetryMerge()
    entity = operations[index][1]
    return CommitConflict(index, reason, f"{entity['PartitionKey']}/{entity['RowKey']}")


def _error_code(exc: Any) -> str:
    """The service's error code (``EntityAlreadyExists``, ...) as plain text."""
    code = getattr(exc, "error_code", None)
    if not code:  # some SDK paths raise without decoding the body: use the header
        response = getattr(exc, "response", None)
        code = getattr(response, "headers", {}).get("x-ms-error-code")
    return str(code.value if isinstance(code, Enum) else code or "")


def _backoff(attempt: int) -> None:
    """Jittered pause before retrying a contended read-modify-write (not synchronisation)."""
    time.sleep(random.uniform(0, min(0.5, 0.005 * 2**attempt)))


def _filter(
    kind: str, job: str | None, prefix: str, start: str | None, end: str | None
) -> tuple[list[str], dict[str, str]]:
    base = _keys.kind_prefix(kind)
    low, high = base + _keys.escape(prefix), _keys.successor(base + _keys.escape(prefix))
    clauses = ["RowKey ge @low", "RowKey lt @high"]
    params = {"low": low, "high": high}
    if job is not None:
        clauses.insert(0, "PartitionKey eq @job")
        params["job"] = _keys.partition_key(job)
    if start is not None:
        clauses.append("RowKey ge @start")
        params["start"] = base + _keys.escape(start)
    if end is not None:
        clauses.append("RowKey lt @end")
        params["end"] = base + _keys.escape(end)
    return clauses, params


def _key_of(entity: Mapping[str, Any]) -> Key:
    kind, record_id = _keys.split_row_key(entity["RowKey"])
    return Key(kind, _keys.unescape(entity["PartitionKey"]), record_id)


def _record(key: Key, entity: Any) -> Record:
    return Record(key, _entity.decode_entity(entity), entity.metadata["etag"])
