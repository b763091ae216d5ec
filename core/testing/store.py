"""An in-memory :class:`~cronwarden.model.ports.Store`: the whole contract, no files, no server."""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

from cronwarden.model.errors import CommitConflict, ContentRefused
from cronwarden.model.ports import (
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
)
from cronwarden.model.text import has_surrogate


def _json_copy(data: Any) -> Any:
    """A deep copy through JSON: what a real store would give back, and a loud ``TypeError``
    for values no real store accepts (datetimes, sets, objects)."""
    return json.loads(json.dumps(data, allow_nan=False))


def _stored(data: Any, where: str) -> str:
    """``data`` as the JSON text kept for it; :class:`ContentRefused` (nothing applied) for
    text no shipped store holds: a lone surrogate, which no UTF-8 encoder takes and which a
    JSON round trip would merge with its neighbour."""
    text = json.dumps(data, allow_nan=False, ensure_ascii=False)
    if has_surrogate(text):
        raise ContentRefused(f"{where}: a lone surrogate in the data; no store can hold it")
    return text


def merged(existing: dict[str, Any] | None, op: Merge) -> dict[str, Any]:
    """The data ``op`` leaves on a record whose data was ``existing`` (``None``: absent): the
    port's shared rule, :func:`cronwarden.model.ports.apply_merge`."""
    return apply_merge(existing, op)


class MemoryStore(Store):
    """Records in a dict, guarded by one lock: every commit is atomic and serialised.

    Versions come from one counter, so they never repeat for a key, even across delete and
    re-create. Data is copied through JSON on the way in and out, so a test cannot mutate a
    stored record by accident and a non-JSON value fails here as it would on a real store.
    ``max_commit_ops`` defaults to 100, the smallest limit of a shipped backend (Table Storage),
    so code that passes here fits every store; so does its refusal of text no store holds (a
    lone surrogate: :class:`~cronwarden.model.errors.ContentRefused`, nothing applied).
    """

    def __init__(self, *, max_commit_ops: int = 100) -> None:
        super().__init__()
        if max_commit_ops < 1:
            raise ValueError("max_commit_ops must be at least 1")
        # every op of a commit is applied under one lock: increments and maxima are atomic
        self.capabilities = StoreCapabilities(max_commit_ops=max_commit_ops)
        self._records: dict[Key, tuple[str, int]] = {}  # key -> (JSON text, version)
        self._versions = itertools.count(1)
        self._lock = threading.Lock()

    def records(self) -> dict[Key, dict[str, Any]]:
        """A snapshot of every record's data (for assertions; not counted as a round trip)."""
        with self._lock:
            return {key: json.loads(text) for key, (text, _) in self._records.items()}

    def _get(self, key: Key) -> Record | None:
        with self._lock:
            found = self._records.get(key)
        return Record(key, json.loads(found[0]), found[1]) if found else None

    def _commit(self, ops: list[Op]) -> list[Version]:
        with self._lock:
            # Decide everything first, then write: a refused op leaves no trace.
            writes: dict[Key, str | None] = {}
            for index, op in enumerate(ops):
                current = self._records.get(op.key)
                where = f"{op.key.kind} {op.key.job}/{op.key.id}"
                if has_surrogate(op.key.job + op.key.id):
                    raise ContentRefused(f"{where!a}: a lone surrogate in the key")
                if isinstance(op, Create):
                    if current is not None:
                        raise CommitConflict(index, "exists", where)
                    writes[op.key] = _stored(dict(op.data), where)
                elif isinstance(op, Update | Delete):
                    if current is None or current[1] != op.version:
                        raise CommitConflict(index, "version", where)
                    writes[op.key] = (
                        None if isinstance(op, Delete) else _stored(dict(op.data), where)
                    )
                else:
                    before = json.loads(current[0]) if current else None
                    writes[op.key] = _stored(merged(before, op), where)
            version = next(self._versions)
            for key, text in writes.items():
                if text is None:
                    del self._records[key]
                else:
                    self._records[key] = (text, version)
            return [None if writes[op.key] is None else version for op in ops]

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:
        with self._lock:
            found = [
                Record(key, json.loads(text), version)
                for key, (text, version) in self._records.items()
                if key.kind == kind
                and (job is None or key.job == job)
                and key.id.startswith(prefix)
                and (start is None or key.id >= start)
                and (end is None or key.id < end)
            ]
        found.sort(key=lambda r: (r.key.job, r.key.id))
        return found if limit is None else found[:limit]

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._records)} records)"
