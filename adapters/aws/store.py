"""DynamoDB implementation of the :class:`~cronwarden.model.ports.Store` port.

Layout: one table. Partition key ``pk`` = the job name, sort key ``sk`` = ``<kind>#<id>``, so
every record of a job lives in one item collection and a commit (one job, by the port's rule)
is one ``TransactWriteItems`` call: atomic, at most 100 distinct items (:attr:`max_commit_ops`).
A commit of one Create, Update or Merge is one plain conditional ``PutItem`` / ``UpdateItem``
instead (the same condition; a single-item write is atomic already, and DynamoDB bills a
transactional write twice the write units of a plain one: the watcher's status writes, a
duplicate delivery's count, any lone record); a lone Delete stays a transaction (below).
A global secondary index ``by-kind`` (hash ``k`` = kind, range ``jk`` = ``<job>#<id>``) serves
queries across jobs (a query of every status record; eventually consistent, as GSIs are). It is
sparse: only the kinds queried across jobs (:data:`INDEXED_KINDS`: status records) carry ``k``
and ``jk``, because DynamoDB writes every item that carries an index's keys into that index
again (billed: 1 write unit per KB of the projected item): run records, locks and ledger pages,
read per job only, would otherwise cost half as much again per write. A query across jobs of
another kind (no caller in cronwarden; the port allows it) is a filtered ``Scan``. Two
sparse ones, ``by-due-at`` and ``by-watch-due`` (hash ``k``, range the number attribute
``due_at`` / ``watch_due``: top-level copies of a status record's due fields, present only
while the field holds an integer), serve :meth:`~cronwarden.model.ports.Store.query_due`: one
range query on each, reading the due records alone.

Item attributes: ``pk``, ``sk``, ``k`` and ``jk`` (status records only), ``v`` (the version: a
random token written by every put or update, so versions never repeat while a key exists),
``ttl`` (epoch seconds derived from the record's ``expire_at``: the table's TTL attribute), and
one attribute per data field, named ``f.<field>`` (a ledger page's ``keys`` and ``fps`` are
compact binary attributes: :mod:`._pages`). An ``int`` field is a DynamoDB number (so ``ADD``
can increment it); every other value is its JSON text (exact round trips of floats, bools,
``None``, lists, maps and very large integers).

Operations (each op of a commit is one transaction item, or the one plain write):

* ``Create`` → ``Put`` with ``attribute_not_exists(pk)``; refused → ``CommitConflict("exists")``
  carrying the item it found (``ReturnValuesOnConditionCheckFailure=ALL_OLD``: no read more).
* ``Update`` → ``Put`` (replace) with ``v = <version>``; ``Delete`` → ``Delete`` with the same
  condition; refused → ``CommitConflict("version")``.
* ``Merge`` → ``Update`` without a condition (sent alone: guarded, below): ``SET`` for fields,
  ``ADD`` for increments.
  ``maximums`` need the current value (DynamoDB has no max in update expressions): the record
  is read first (one extra round trip each, counted) and written with a condition on the version
  read; when *that* condition fails (a concurrent writer), the commit is sent again with a fresh
  read, at most :attr:`DynamoStore.merge_attempts` times. Nothing of a refused attempt applied.

The failing op's index comes from the positional ``CancellationReasons`` of
``TransactionCanceledException``. Transport failures map to ``StoreUnavailable`` (not applied)
or ``CommitOutcomeUnknown`` (sent, then lost) — see :mod:`.errors`. botocore retries throttling
and 5xx itself; a resent ``TransactWriteItems`` carries the same idempotency token, so a retry
of a transaction that did apply returns success instead of a false conflict.

A plain write has no such token; its idempotency rests on the version every write writes (a
random token per commit, the same in every send of it):

* a refusal (``ConditionalCheckFailedException``) whose ``ALL_OLD`` item holds this commit's
  own version is a resend of a write that landed: success (the claim's Create, an Update's
  compare-and-set, a Merge written against a read);
* a guarded Merge is conditioned on ``attribute_not_exists(v) OR v <> :mine``: a resend of one
  that landed is refused (then judged as above) instead of adding its increments twice;
* a refusal after an attempt that may have applied (a 5xx or a lost reply, noted per thread by a
  ``needs-retry`` hook on the client) whose item is not ours is
  :class:`~cronwarden.model.errors.CommitOutcomeUnknown`, never a false "nothing applied": the
  first send may have landed and been overwritten before the resend. A throttled attempt applied
  nothing: its resend's refusal is a plain conflict.

Residual: a guarded Merge that landed, whose reply was lost, and whose record another writer
changed before botocore's resend (milliseconds) is applied again by that resend (its increments
counted twice); a transaction's token would have made that resend a no-op. The lone Merges
with increments on a run's path count refusals (a duplicate delivery, a skip, a refused
overlap's failure).

A lone Delete stays a ``TransactWriteItems``: a resend of a delete that landed finds no item, so
"ours applied" and "someone else deleted it" could not be told apart (no item, no version to
compare); the token answers that resend as success. Deletes are rare (a lock's release rides on
the completion's transaction; the rest are operator commands).
"""

from __future__ import annotations

import functools
import json
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    ConfigurationError,
    ContentRefused,
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
    decode_json,
)
from cronwarden.model.text import has_surrogate, storable

from ._clients import client
from ._pages import decode_page_fields, encode_page_fields
from .errors import error_code, store_error
from .settings import AwsSettings

INDEX = "by-kind"
#: the kinds whose items carry the ``by-kind`` index's keys (queried across jobs)
INDEXED_KINDS = frozenset({STATUS})
#: the sparse index of each due field of the status records (``query_due``): name, attribute
DUE_INDEXES = {"due_at": "by-due-at", "watch_due": "by-watch-due"}
FIELD_PREFIX = "f."
_SEP = "#"
_TOP = "\U0010ffff"  #: sorts after every character: the inclusive upper bound of a prefix
_NEVER = "never"  #: a version no write produces (stands for a foreign or missing version)
_MAX_NUMBER = 10**38  #: DynamoDB numbers keep 38 significant digits; larger ints go as JSON
_T = TypeVar("_T")


class DynamoStore(Store):
    """Records in one DynamoDB table (see the module docstring for the layout).

    ``client`` is a boto3 DynamoDB client; :meth:`from_settings` builds one from
    :class:`~.settings.AwsSettings` and creates the table when ``create_missing`` is set.
    Thread-safe (boto3 clients are).
    """

    #: TransactWriteItems: 100 items; ADD increments in the write itself; no max in update
    #: expressions, so a maximum reads the item first (one more round trip, counted)
    capabilities = StoreCapabilities(
        max_commit_ops=100,
        atomic_increment=True,
        atomic_maximum=False,
        max_page_bytes=300_000,  #: DynamoDB items are at most 400 KB
    )
    merge_attempts = 30  #: tries of a commit whose read-then-write maximum keeps losing races
    conflict_attempts = 8  #: tries of a transaction refused by a concurrent transaction

    def __init__(self, dynamodb: Any, table: str) -> None:
        super().__init__()
        self._db = dynamodb
        self.table = table
        self._closed = False
        events = getattr(getattr(dynamodb, "meta", None), "events", None)
        if events is not None:  # a boto3 client: note the attempts of a plain write
            for operation in ("PutItem", "UpdateItem"):
                events.register(
                    f"needs-retry.dynamodb.{operation}",
                    _note_attempt,
                    unique_id=f"cronwarden-dynamo-attempts-{operation}",
                )

    @classmethod
    def from_settings(cls, settings: AwsSettings) -> DynamoStore:
        store = cls(client("dynamodb", settings), settings.table)
        if settings.create_missing:
            store.create_table()
        return store

    # -- table -----------------------------------------------------------------------------
    def create_table(self) -> None:
        """Create the table (on-demand capacity, the ``by-kind`` index, TTL on ``ttl``) unless it
        exists; waits until it is active. Production tables come from Terraform."""
        try:
            self._db.create_table(**table_definition(self.table))
        except Exception as exc:
            if error_code(exc) != "ResourceInUseException":
                raise
        self._db.get_waiter("table_exists").wait(
            TableName=self.table, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
        try:
            self._db.update_time_to_live(
                TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"},
            )
        except Exception as exc:  # already enabled
            if error_code(exc) != "ValidationException":
                raise

    def delete_table(self) -> None:
        self._db.delete_table(TableName=self.table)

    # -- reads -----------------------------------------------------------------------------
    def _get(self, key: Key) -> Record | None:
        item = self._read(key)
        return None if item is None else _record(item)

    def _read(self, key: Key) -> dict[str, Any] | None:
        response = self._call(
            lambda: self._db.get_item(TableName=self.table, Key=_key(key), ConsistentRead=True),
            write=False,
            what="GetItem",
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:
        if limit is not None and limit <= 0:
            return []

        def wanted(record: Record) -> bool:
            rid = record.key.id
            return (
                rid.startswith(prefix)
                and (start is None or rid >= start)
                and (end is None or rid < end)
            )

        found: list[Record] = []
        if job is not None:
            low = max(prefix, start or "")
            high = prefix + _TOP if end is None else min(prefix + _TOP, end)
            if low > high:
                return []
            request = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
                "ExpressionAttributeValues": {
                    ":pk": {"S": job},
                    ":lo": {"S": kind + _SEP + low},
                    ":hi": {"S": kind + _SEP + high},
                },
                "ConsistentRead": True,
            }
            for item in self._pages(request):
                record = _record(item)
                if wanted(record):
                    found.append(record)
                    if limit is not None and len(found) >= limit:
                        break
            return found
        if kind in INDEXED_KINDS:
            request = {
                "TableName": self.table,
                "IndexName": INDEX,
                "KeyConditionExpression": "k = :k",
                "ExpressionAttributeValues": {":k": {"S": kind}},
            }
            items = self._pages(request)
        else:  # not in the sparse index: every item of the kind, by a filtered scan
            request = {
                "TableName": self.table,
                "FilterExpression": "begins_with(sk, :kind)",
                "ExpressionAttributeValues": {":kind": {"S": kind + _SEP}},
                "ConsistentRead": True,
            }
            items = self._pages(request, scan=True)
        found = [r for r in map(_record, items) if wanted(r)]
        found.sort(key=lambda r: (r.key.job, r.key.id))
        return found if limit is None else found[:limit]

    def _query_due(self, before: int) -> list[Record]:
        """One range query on each due field's sparse index (``Query``, eventually
        consistent), sent side by side (boto3 clients are thread-safe); a record due by both
        comes once."""
        from concurrent.futures import ThreadPoolExecutor

        def due(name: str) -> list[Record]:
            self._round_trip("query", STATUS)
            request = {
                "TableName": self.table,
                "IndexName": DUE_INDEXES[name],
                "KeyConditionExpression": "k = :k AND #due <= :before",
                "ExpressionAttributeNames": {"#due": name},
                "ExpressionAttributeValues": {":k": {"S": STATUS}, ":before": {"N": str(before)}},
            }
            return [_record(item) for item in self._pages(request)]

        try:
            with ThreadPoolExecutor(len(DUE_FIELDS)) as pool:
                answers = list(pool.map(due, DUE_FIELDS))
        except (ValueError, ConfigurationError) as exc:
            # a table made before the due indexes (DynamoDB: ValidationException, moto: not
            # found): correct without them (every status record read; a missing table fails
            # that query too), and said at every check until the indexes are added
            from cronwarden.model.logs import get_logger

            get_logger("store").error(
                "DynamoDB table %s has no %s index (%s): the watcher reads every status "
                "record; add the indexes (the state module declares them)",
                self.table,
                " / ".join(DUE_INDEXES.values()),
                exc,
                extra={"event": "store.missing_index"},
            )
            return super()._query_due(before)
        found: dict[str, Record] = {}
        for records in answers:
            for record in records:
                found.setdefault(record.key.job, record)
        return list(found.values())

    def _pages(self, request: dict[str, Any], *, scan: bool = False) -> Iterator[dict[str, Any]]:
        send, what = (self._db.scan, "Scan") if scan else (self._db.query, "Query")
        first = True
        while True:
            if not first:
                self._count()  # every further page is one more request
            first = False
            response = self._call(functools.partial(send, **request), write=False, what=what)
            yield from response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            request = {**request, "ExclusiveStartKey": last}

    # -- commits ---------------------------------------------------------------------------
    def _commit(self, ops: list[Op]) -> list[Version]:
        for op in ops:
            if _holds_surrogate(op):
                # JSON on the wire: a lone surrogate is refused, or merged with a neighbour
                # into another character (stored silently changed); refuse it here
                raise ContentRefused(
                    f"DynamoDB cannot hold {op.key.kind} {op.key.job}/{storable(op.key.id)}: "
                    "it holds text that is not valid Unicode (a lone surrogate); nothing sent"
                )
        sends = _Sends()
        outer = getattr(_ATTEMPTS, "sends", None)  # a commit sent from within a botocore hook
        _ATTEMPTS.sends = sends
        try:
            return self._send(ops, sends)
        finally:
            _ATTEMPTS.sends = outer

    def _send(self, ops: list[Op], sends: _Sends) -> list[Version]:
        """Send ``ops`` (checked) until applied or refused; ``sends`` notes whether any send
        of a plain write may have applied (see :func:`_note_attempt`)."""
        versions: list[Version] = [None if isinstance(op, Delete) else _new_version() for op in ops]
        reads = {i for i, op in enumerate(ops) if isinstance(op, Merge) and op.maximums}
        # one record, written or merged: a plain conditional write (half the write units of a
        # transaction); a lone Delete stays a transaction (see the module docstring)
        single = len(ops) == 1 and not isinstance(ops[0], Delete)
        conflicts = 0
        for attempt in range(self.merge_attempts):
            items: list[dict[str, Any]] = []
            for index, op in enumerate(ops):
                current: dict[str, Any] | None = None
                if index in reads:
                    self._count()  # the read a maximum needs is a round trip of its own
                    current = self._read(op.key) or {}
                items.append(self._item(op, versions[index], current, single=single))
            if attempt:
                self._count()  # a resent write is one more round trip
            try:
                if single:
                    self._write_one(items[0], sends)
                else:
                    self._call(
                        functools.partial(self._db.transact_write_items, TransactItems=items),
                        write=True,
                        what="TransactWriteItems",
                    )
                return versions
            except _Refused as refused:
                mine = versions[0]
                if refused.version == mine:
                    # our own write, resent by botocore after it had landed (its reply lost):
                    # it applied once, and the resend was refused by its condition
                    return versions
                if refused.retried:
                    # resent by botocore, refused, and the record is not ours: the first send
                    # may have landed and been overwritten since; never a false "not applied"
                    what = f"{ops[0].key.kind} {ops[0].key.job}/{ops[0].key.id}"
                    raise CommitOutcomeUnknown(
                        f"DynamoDB write of {what} was resent after a lost reply and refused; "
                        "the first send may have been applied"
                    ) from None
                if 0 in reads:
                    _backoff(attempt)
                    continue
                raise _conflict(ops, 0, refused.found()) from None
            except ValueError as exc:
                # ADD refuses a field stored as null; the Merge contract counts null as 0:
                # apply those increments against what is read, like a maximum.
                bumps = {i for i, op in enumerate(ops) if isinstance(op, Merge) and op.increments}
                if "incorrect data type" not in str(exc) or bumps <= reads:
                    raise
                reads |= bumps
                continue
            except _Cancelled as cancelled:
                failed = cancelled.failed_index()
                if failed is not None:
                    if failed in reads:
                        _backoff(attempt)
                        continue
                    raise _conflict(ops, failed, cancelled.found(failed)) from None
            except _Busy:
                pass  # a plain write refused by a transaction in flight on its item
            # refused by a concurrent transaction: nothing applied
            conflicts += 1
            if conflicts >= self.conflict_attempts:
                raise StoreUnavailable(
                    f"DynamoDB refused a commit on job {ops[0].key.job!r} "
                    f"{conflicts} times (transaction conflicts); nothing was applied"
                )
            _backoff(attempt)
        raise StoreUnavailable(
            f"Merge maximums on job {ops[0].key.job!r} lost {self.merge_attempts} races in a "
            "row; nothing was applied"
        )

    def _item(
        self, op: Op, version: Version, current: dict[str, Any] | None, *, single: bool = False
    ) -> dict[str, Any]:
        """One ``TransactItems`` entry for ``op`` (``current``: the item read for maximums;
        ``single``: sent alone by :meth:`_write_one`, so a Merge is guarded against a resend)."""
        if isinstance(op, Create):
            return {
                "Put": {
                    "TableName": self.table,
                    "Item": _full_item(op.key, op.data, version),
                    "ConditionExpression": "attribute_not_exists(pk)",
                    # a refusal brings the item it found: a claim of a finished window
                    # judges it without reading it again (a duplicate costs one call less)
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        if isinstance(op, Update):
            return {
                "Put": {
                    "TableName": self.table,
                    "Item": _full_item(op.key, op.data, version),
                    "ConditionExpression": "#v = :old",
                    "ExpressionAttributeNames": {"#v": "v"},
                    "ExpressionAttributeValues": {":old": {"S": _version_text(op.version)}},
                }
            }
        if isinstance(op, Delete):
            return {
                "Delete": {
                    "TableName": self.table,
                    "Key": _key(op.key),
                    "ConditionExpression": "#v = :old",
                    "ExpressionAttributeNames": {"#v": "v"},
                    "ExpressionAttributeValues": {":old": {"S": _version_text(op.version)}},
                }
            }
        assert isinstance(op, Merge)
        return {"Update": _merge_update(self.table, op, version, current, guard=single)}

    def _write_one(self, item: dict[str, Any], sends: _Sends) -> None:
        """Send one ``TransactItems`` entry (a ``Put`` or an ``Update``) as a plain conditional
        ``PutItem`` / ``UpdateItem``: the same condition, and the item found on a refusal
        (``ALL_OLD``), which :meth:`_commit` reads for its own version. Raises
        :class:`_Refused` when the condition fails, saying whether any send of this commit so
        far may have applied (``sends``)."""
        ((kind, request),) = item.items()
        request = {**request, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if kind == "Put":
            send, what = self._db.put_item, "PutItem"
        else:
            assert kind == "Update", kind
            send, what = self._db.update_item, "UpdateItem"
        try:
            self._call(functools.partial(send, **request), write=True, what=what)
        except _Refused as refused:
            refused.retried = sends.maybe_applied
            raise

    # -- plumbing --------------------------------------------------------------------------
    def _call(self, action: Callable[[], _T], *, write: bool, what: str) -> _T:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        try:
            return action()
        except Exception as exc:
            if error_code(exc) == "TransactionCanceledException":
                raise _Cancelled(exc) from None
            if error_code(exc) == "ConditionalCheckFailedException":
                raise _Refused(exc) from None
            if error_code(exc) == "TransactionConflictException" and what != "TransactWriteItems":
                raise _Busy(str(exc)) from None
            if error_code(exc) == "ItemCollectionSizeLimitExceededException" and write:
                raise ContentRefused(f"DynamoDB {what}: {exc}; nothing applied") from None
            if error_code(exc) == "ValidationException":
                if write:  # the write's content (an item past 400 KB, text it cannot hold)
                    raise ContentRefused(f"DynamoDB {what}: {exc}; nothing applied") from None
                raise ValueError(f"DynamoDB {what}: {exc}") from None
            mapped = store_error(exc, write=write, what=what)
            if mapped is None:
                raise
            raise mapped from None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._db.close()


class _Busy(Exception):
    """``TransactionConflictException`` of a plain write: a transaction in flight holds its
    item; nothing applied (resent like a transaction refused by a concurrent one)."""


class _Refused(Exception):
    """``ConditionalCheckFailedException`` of a single-item write, with the item it found
    (``ReturnValuesOnConditionCheckFailure=ALL_OLD``) and whether an earlier send of the same
    commit may have applied."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(str(exc))
        response = getattr(exc, "response", None) or {}
        item = response.get("Item")
        self.item: dict[str, Any] | None = item if isinstance(item, dict) else None
        #: an earlier send of the same request may have applied (a reply lost or a 5xx, then
        #: botocore's resend): set by :meth:`DynamoStore._write_one` from :func:`_note_attempt`
        self.retried = False

    @property
    def version(self) -> str | None:
        """The version of the item found, or None (no item, or none returned)."""
        if not self.item:
            return None
        value = (self.item.get("v") or {}).get("S")
        return str(value) if value is not None else None

    def found(self) -> Record | None:
        """The record found, or None when the reply did not carry a whole one."""
        item = self.item
        if not item or "pk" not in item or "sk" not in item or "v" not in item:
            return None
        return _record(item)


class _Sends:
    """The sends of one commit: whether any of them may have applied."""

    __slots__ = ("maybe_applied",)

    def __init__(self) -> None:
        self.maybe_applied = False


#: per thread: ``sends``, the :class:`_Sends` of the commit in flight (botocore calls its hooks
#: on the thread that sent the request)
_ATTEMPTS = threading.local()


def _note_attempt(
    response: Any = None, caught_exception: BaseException | None = None, **_: Any
) -> None:
    """botocore's ``needs-retry`` hook, after each attempt of a ``PutItem`` / ``UpdateItem``:
    note an attempt that may have applied (a reply lost after sending, a 5xx) so that a later
    attempt's refusal is not taken for "nothing applied". Decides nothing (returns None)."""
    maybe = False
    if caught_exception is not None:
        from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

        # not connected: never sent. Any other transport failure may have been sent
        maybe = not isinstance(caught_exception, ConnectTimeoutError | EndpointConnectionError)
    elif response is not None:
        status = getattr(response[0], "status_code", 0) or 0
        maybe = int(status) >= 500
    sends = getattr(_ATTEMPTS, "sends", None)
    if maybe and sends is not None:
        sends.maybe_applied = True


def _conflict(ops: list[Op], index: int, found: Record | None) -> CommitConflict:
    """The :class:`CommitConflict` of ``ops[index]`` refused by its condition; ``found`` is
    carried for a Create only (the claim judges the run record it found)."""
    refused = ops[index]
    reason = "exists" if isinstance(refused, Create) else "version"
    detail = f"{refused.key.kind} {refused.key.job}/{refused.key.id}"
    return CommitConflict(
        index, reason, detail, found=found if isinstance(refused, Create) else None
    )


class _Cancelled(Exception):
    """``TransactionCanceledException`` with its positional ``CancellationReasons``."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(str(exc))
        response = getattr(exc, "response", None) or {}
        self.reasons: list[dict[str, Any]] = list(response.get("CancellationReasons") or [])
        if not self.reasons:  # some SDK paths leave them in the message only
            self.reasons = _reasons_from_message(str(exc))

    def found(self, index: int) -> Record | None:
        """The item the op at ``index`` found (``ReturnValuesOnConditionCheckFailure``), or
        None when the reply did not carry it (a reason parsed from the message, an old
        emulator): the caller reads it then."""
        if index >= len(self.reasons):
            return None
        item = self.reasons[index].get("Item")
        if not item or "pk" not in item or "sk" not in item or "v" not in item:
            return None
        return _record(item)

    def failed_index(self) -> int | None:
        """The first op whose condition failed, or None when no condition failed (a
        concurrent transaction, throttling): the commit may be sent again as it is."""
        codes = [str(r.get("Code") or "None") for r in self.reasons]
        for index, code in enumerate(codes):
            if code == "ConditionalCheckFailed":
                return index
        retryable = {"None", "TransactionConflict", "ThrottlingError"}
        retryable |= {"ProvisionedThroughputExceeded"}
        if all(code in retryable for code in codes) and codes:
            return None
        if any(code in _CONTENT_CODES for code in codes):
            raise ContentRefused(
                f"DynamoDB refused the transaction for its content: {', '.join(codes)}; "
                "nothing applied"
            )
        raise ValueError(f"DynamoDB refused the transaction: {', '.join(codes) or self}")


#: cancellation reasons that refuse an op's content: an item past its limits, a value DynamoDB
#: cannot hold (``UnicodeEncodeError``: how moto reports a lone surrogate in a string)
_CONTENT_CODES = frozenset(
    {"ValidationError", "ItemCollectionSizeLimitExceeded", "UnicodeEncodeError"}
)


def _reasons_from_message(message: str) -> list[dict[str, Any]]:
    """``... cancellation reasons [None, ConditionalCheckFailed]`` → positional codes."""
    start, end = message.rfind("["), message.rfind("]")
    if start < 0 or end < start:
        return []
    return [{"Code": part.strip()} for part in message[start + 1 : end].split(",")]


def table_definition(table: str) -> dict[str, Any]:
    """``CreateTable`` arguments of the layout above (on-demand capacity)."""
    return {
        "TableName": table,
        "AttributeDefinitions": [
            *({"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "k", "jk")),
            *({"AttributeName": name, "AttributeType": "N"} for name in DUE_FIELDS),
        ],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": INDEX,
                "KeySchema": [
                    {"AttributeName": "k", "KeyType": "HASH"},
                    {"AttributeName": "jk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            *(
                {
                    "IndexName": DUE_INDEXES[name],
                    "KeySchema": [
                        {"AttributeName": "k", "KeyType": "HASH"},
                        {"AttributeName": name, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
                for name in DUE_FIELDS
            ),
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }


def _new_version() -> str:
    return secrets.token_hex(12)


def _version_text(version: Version) -> str:
    return version if isinstance(version, str) and version else _NEVER


def _key(key: Key) -> dict[str, Any]:
    return {"pk": {"S": key.job}, "sk": {"S": key.kind + _SEP + key.id}}


def _index_attributes(key: Key) -> dict[str, Any]:
    """The ``by-kind`` index's keys of ``key``: only for :data:`INDEXED_KINDS` (sparse)."""
    if key.kind not in INDEXED_KINDS:
        return {}
    return {"k": {"S": key.kind}, "jk": {"S": key.job + _SEP + key.id}}


def encode(value: Any) -> dict[str, Any]:
    """A data value as a DynamoDB attribute value (ints as numbers, the rest as JSON text)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _MAX_NUMBER:
        return {"N": str(value)}
    return {"S": json.dumps(value, ensure_ascii=False, separators=(",", ":"))}


def decode(attribute: Mapping[str, Any]) -> Any:
    """The data value of an attribute :func:`encode` wrote. Text is JSON: a string without
    quotes or escapes inside is its own value, ``null`` / ``true`` / ``false`` are looked up,
    the rest goes through the C scanner (``raw_decode``), and anything that is not exactly
    one JSON document through ``json.loads`` (which raises for it). A status query decodes
    every field of every record: this is most of the adapter's own time there."""
    text = attribute.get("S")
    if text is None:
        if "N" in attribute:
            number = str(attribute["N"])
            return int(number) if number.lstrip("-").isdigit() else float(number)
        return json.loads(attribute["S"])
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        inner = text[1:-1]
        if '"' not in inner and "\\" not in inner:
            return inner
    literal = _LITERALS.get(text, _NOT_LITERAL)
    if literal is not _NOT_LITERAL:
        return literal
    return decode_json(text)


_NOT_LITERAL = object()
_LITERALS: dict[str, Any] = {"null": None, "true": True, "false": False}


def _ttl(value: Any) -> dict[str, Any] | None:
    """The TTL attribute for an ``expire_at`` value (ISO text or epoch seconds)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"N": str(int(value))}
    if isinstance(value, str):
        try:
            return {"N": str(int(datetime.fromisoformat(value).timestamp()))}
        except ValueError:
            return None
    return None


def _holds_surrogate(op: Op) -> bool:
    """Whether ``op``'s key or data holds a surrogate code point (see
    :func:`~cronwarden.model.text.has_surrogate`)."""
    if has_surrogate(op.key.job) or has_surrogate(op.key.id):
        return True
    data = op.fields if isinstance(op, Merge) else getattr(op, "data", None)
    if not data:
        return False
    return has_surrogate(json.dumps(data, ensure_ascii=False, default=str))


def _full_item(key: Key, data: Mapping[str, Any], version: str) -> dict[str, Any]:
    item = {**_key(key), **_index_attributes(key), "v": {"S": version}}
    compact = encode_page_fields(key, data)
    for name, value in data.items():
        item[FIELD_PREFIX + name] = compact.get(name) or encode(value)
    ttl = _ttl(data.get("expire_at"))
    if ttl is not None:
        item["ttl"] = ttl
    if key.kind == STATUS:
        for name in DUE_FIELDS:
            value = _due_number(data.get(name))
            if value is not None:
                item[name] = value
    return item


def _due_number(value: Any) -> dict[str, Any] | None:
    """A due field's index attribute: the integer as a number, else None (left out: a sparse
    index holds only the records whose field is an integer)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _MAX_NUMBER:
        return {"N": str(value)}
    return None


def _merge_update(
    table: str, op: Merge, version: str, current: dict[str, Any] | None, *, guard: bool = False
) -> dict[str, Any]:
    """The ``Update`` of ``op`` writing ``version``. Written against ``current`` (a read):
    conditioned on the version read. Else unconditioned, unless ``guard``: then conditioned
    on the record not holding ``version`` yet, so a resend of a write that landed (a plain
    write has no idempotency token) is refused instead of applied twice."""
    names: dict[str, str] = {"#v": "v", "#k": "k", "#jk": "jk"}
    values: dict[str, Any] = {":v": {"S": version}}
    sets = ["#v = :v"]
    removes: list[str] = []
    if op.key.kind in INDEXED_KINDS:
        sets += ["#k = :k", "#jk = :jk"]
        values.update({":k": {"S": op.key.kind}, ":jk": {"S": op.key.job + _SEP + op.key.id}})
    else:  # an item written before the index was sparse leaves it
        removes += ["#k", "#jk"]
    adds: list[str] = []
    fields = dict(op.fields)
    read = current is not None  # {}: read, and absent
    existing = _data(current) if current else {}
    for name, floor in op.maximums.items():
        value = existing.get(name)
        fields[name] = floor if not isinstance(value, int) else max(value, floor)
    increments = dict(op.increments)
    if read:  # applied against what was read (null or missing count as 0)
        for name, amount in increments.items():
            value = existing.get(name)
            fields[name] = (value if isinstance(value, int) else 0) + amount
        increments = {}
    compact = encode_page_fields(op.key, fields)
    for n, (name, value) in enumerate(fields.items()):
        names[f"#f{n}"] = FIELD_PREFIX + name
        values[f":f{n}"] = compact.get(name) or encode(value)
        sets.append(f"#f{n} = :f{n}")
    for n, (name, amount) in enumerate(increments.items()):
        names[f"#i{n}"] = FIELD_PREFIX + name
        values[f":i{n}"] = {"N": str(int(amount))}
        adds.append(f"#i{n} :i{n}")
    ttl = _ttl(fields.get("expire_at"))
    if ttl is not None:
        values[":ttl"] = ttl
        sets.append("#ttl = :ttl")
        names["#ttl"] = "ttl"
    if op.key.kind == STATUS:  # the due fields' index attributes follow the fields
        for n, name in enumerate(DUE_FIELDS):
            names[f"#d{n}"] = name
            if name in increments:
                values[f":d{n}"] = {"N": str(int(increments[name]))}
                adds.append(f"#d{n} :d{n}")
            elif name in fields:
                number = _due_number(fields[name])
                if number is None:
                    removes.append(f"#d{n}")
                else:
                    values[f":d{n}"] = number
                    sets.append(f"#d{n} = :d{n}")
            else:
                del names[f"#d{n}"]
    expression = "SET " + ", ".join(sets) + (" ADD " + ", ".join(adds) if adds else "")
    if removes:
        expression += " REMOVE " + ", ".join(removes)
    update: dict[str, Any] = {
        "TableName": table,
        "Key": _key(op.key),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if read:  # written against what was read: a concurrent writer fails (and retries) it
        if not current:
            update["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            update["ConditionExpression"] = "#v = :old"
            values[":old"] = current["v"]
    elif guard:
        update["ConditionExpression"] = "attribute_not_exists(#v) OR #v <> :v"
    return update


def _data(item: Mapping[str, Any]) -> dict[str, Any]:
    keys = item.get(FIELD_PREFIX + "keys")
    if keys is not None and "B" in keys:  # a ledger page's compact fields
        fps = item.get(FIELD_PREFIX + "fps")
        data = decode_page_fields(bytes(keys["B"]), None if fps is None else bytes(fps["B"]))
        skip = {FIELD_PREFIX + name for name in data}
        return {
            **{
                name[len(FIELD_PREFIX) :]: decode(value)
                for name, value in item.items()
                if name.startswith(FIELD_PREFIX) and name not in skip
            },
            **data,
        }
    return {
        name[len(FIELD_PREFIX) :]: decode(value)
        for name, value in item.items()
        if name.startswith(FIELD_PREFIX)
    }


def _record(item: Mapping[str, Any]) -> Record:
    kind, _, record_id = str(item["sk"]["S"]).partition(_SEP)
    key = Key(kind, str(item["pk"]["S"]), record_id)
    return Record(key, _data(item), str(item["v"]["S"]))


def _backoff(attempt: int) -> None:
    """Jittered pause before resending a refused transaction (not synchronisation)."""
    time.sleep(random.uniform(0, min(0.5, 0.01 * 2**attempt)))


__all__ = [
    "DUE_INDEXES",
    "INDEX",
    "INDEXED_KINDS",
    "DynamoStore",
    "decode",
    "encode",
    "table_definition",
]
