"""The append-only history a chaos trial is judged by.

Two tables in one SQLite file shared by the test and every chaos worker process:

* ``effects``: each side effect a chaos job performs (item key, idempotency key, run id, fence,
  pid, wall time, whether the ledger flagged it *uncertain*);
* ``commits``: each commit the store *accepted* (and, for diagnosis, those it refused or that
  raised), recorded by :class:`RecordingStore` around the real store: op kinds and keys, the
  run record's fence / owner / state / lease expiry as written, the writer's clock skew, and the
  wall time just before and just after the commit.

Wall times are the machine's real clock (``time.time()``), never a worker's skewed engine clock,
so times from different processes compare.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from cronwarden.model.errors import CommitConflict
from cronwarden.model.ports import (
    ITEM,
    RUN,
    Create,
    Delete,
    Key,
    Merge,
    Op,
    Record,
    Store,
    Update,
    Version,
)
from cronwarden.model.records import CARRIED, CODE_STATES, parse_iso, sibling_page_key

_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    run_key TEXT, item TEXT, idem TEXT, run_id TEXT, fence INTEGER, pid INTEGER,
    at REAL, uncertain INTEGER, kind TEXT, checked_at REAL);
CREATE TABLE IF NOT EXISTS commits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, pid INTEGER, status TEXT, t_before REAL,
    t_after REAL, skew REAL, ops TEXT, run_key TEXT, fence INTEGER, owner TEXT, state TEXT,
    lease_expires REAL, items TEXT, error TEXT, started_at TEXT)
"""

_local = threading.local()


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
        conn.execute(statement)
    return conn


def _conn(path: str) -> sqlite3.Connection:
    cached: tuple[str, sqlite3.Connection] | None = getattr(_local, "conn", None)
    if cached is None or cached[0] != path:
        cached = (path, connect(path))
        _local.conn = cached
    return cached[1]


def record_effect(
    path: str,
    *,
    run_key: str,
    item: str,
    idem: str,
    run_id: str,
    fence: int,
    uncertain: bool,
    checked_at: float,
    kind: str = "item",
) -> None:
    """``checked_at``: wall time just *before* the owner last confirmed it still held the lease
    (``ctx.check()``) ahead of this effect: the decision to act was taken no earlier."""
    _conn(path).execute(
        "INSERT INTO effects VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_key,
            item,
            idem,
            run_id,
            fence,
            os.getpid(),
            time.time(),
            int(uncertain),
            kind,
            checked_at,
        ),
    )


def _run_key(key: Key) -> str:
    return f"{key.job}:{key.id}"


def _describe(ops: Sequence[Op], pages: dict[Key, list[str]] | None = None) -> dict[str, Any]:
    """What the checker needs from one commit's ops. ``pages``: the keys of the ledger pages
    this process wrote whole (a later ``states`` update of a page names no keys)."""
    pages = {} if pages is None else pages
    kinds = [f"{type(op).__name__}:{op.key.kind}:{op.key.id}" for op in ops]
    run: dict[str, Any] = {}
    runs: list[dict[str, Any]] = []  #: two in a completion that claimed the next window
    items: list[list[str]] = []
    for op in ops:
        if op.key.kind == RUN and isinstance(op, Create | Update):
            data = op.data
            expires = parse_iso(data.get("lease_expires"))
            run = {
                "run_key": _run_key(op.key),
                "fence": data.get("fence"),
                "owner": data.get("owner"),
                "state": data.get("state"),
                "lease_expires": expires.timestamp() if expires else None,
                "started_at": data.get("started_at"),
            }
            runs.append(run)
        elif op.key.kind == ITEM and isinstance(op, Merge):
            window, _, item = op.key.id.partition("/")
            run_key = f"{op.key.job}:{window}"
            if "states" not in op.fields:  # an item record
                items.append([run_key, item, str(op.fields.get("state"))])
                continue
            states = str(op.fields["states"])
            if isinstance(op.fields.get("keys"), list):  # a whole page
                pages[op.key] = [str(k) for k in op.fields["keys"]]
                items += [
                    [run_key, k, CODE_STATES[c]]
                    for k, c in zip(pages[op.key], states, strict=False)
                ]
                carried = op.fields.get(CARRIED)  # later states of this owner's earlier pages
                for seq, later in (carried or {}).items():
                    keys = pages.get(sibling_page_key(op.key, int(seq)), [])
                    items += [
                        [run_key, k, CODE_STATES[c]]
                        for k, c in zip(keys, str(later), strict=False)
                        if c in ("d", "r")
                    ]
            else:  # its states only: the done / released marks it carries
                keys = pages.get(op.key, [])
                items += [
                    [run_key, k, CODE_STATES[c]]
                    for k, c in zip(keys, states, strict=False)
                    if c in ("d", "r")
                ]
    return {"ops": kinds, "run": run, "runs": runs, "items": items}


def _per_run(described: dict[str, Any]) -> list[dict[str, Any]]:
    """One history row per run record a commit wrote, each with its own items: a completion
    that claimed the next window (:mod:`cronwarden.run.handover`) is that run's completion and
    the next run's claim."""
    if len(described["runs"]) <= 1:
        return [described]
    return [
        {
            **described,
            "run": run,
            "items": [i for i in described["items"] if i[0] == run["run_key"]],
        }
        for run in described["runs"]
    ]


class RecordingStore(Store):
    """Delegates to ``inner`` through its public methods and appends every commit (accepted or
    not) to the history. Round trips are ``inner``'s own (forwarded by an observer), so reads an
    adapter makes inside a commit are counted here too.

    ``skew`` is the writer's clock offset in seconds, so the checker can turn the lease expiry
    it wrote (by its own clock) into real time.
    """

    def __init__(self, inner: Store, history: str, *, skew: float = 0.0) -> None:
        super().__init__()
        self.inner = inner
        self._pages: dict[Key, list[str]] = {}  #: keys of the ledger pages written whole
        self.history = history
        self.skew = skew
        self.capabilities = inner.capabilities
        self.before_commit: Any = None  #: fault-injection hook: called with the ops
        inner.add_observer(lambda trip: self._round_trip(trip.operation, trip.kind, trip.ops))

    def get(self, key: Key) -> Record | None:
        return self.inner.get(key)

    def query(
        self,
        kind: str,
        job: str | None = None,
        *,
        prefix: str = "",
        start: str | None = None,
        end: str | None = None,
        limit: int | None = None,
    ) -> list[Record]:
        return self.inner.query(kind, job, prefix=prefix, start=start, end=end, limit=limit)

    def commit(self, ops: Sequence[Op]) -> list[Version]:
        if not ops:
            return []
        return self._commit(list(ops))

    def _get(self, key: Key) -> Record | None:
        return self.inner.get(key)

    def _query(
        self,
        kind: str,
        job: str | None,
        prefix: str,
        start: str | None,
        end: str | None,
        limit: int | None,
    ) -> list[Record]:
        return self.query(kind, job, prefix=prefix, start=start, end=end, limit=limit)

    def _commit(self, ops: list[Op]) -> list[Version]:
        if self.before_commit is not None:
            self.before_commit(ops)
        described = _describe(ops, self._pages)
        t_before = time.time()
        status, error = "accepted", None
        try:
            versions = self.inner.commit(ops)
        except CommitConflict as exc:
            status, error = "conflict", f"index {exc.index}"
            raise
        except Exception as exc:  # outage: the write may or may not have landed
            status, error = "error", f"{type(exc).__name__}"
            raise
        finally:
            t_after = time.time()
            for part in _per_run(described):
                self._append(status, t_before, t_after, part, error)
        return versions

    def _append(
        self, status: str, t_before: float, t_after: float, d: dict[str, Any], error: str | None
    ) -> None:
        run = d["run"]
        _conn(self.history).execute(
            "INSERT INTO commits (pid, status, t_before, t_after, skew, ops, run_key, fence, "
            "owner, state, lease_expires, items, error, started_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                os.getpid(),
                status,
                t_before,
                t_after,
                self.skew,
                json.dumps(d["ops"]),
                run.get("run_key"),
                run.get("fence"),
                run.get("owner"),
                run.get("state"),
                run.get("lease_expires"),
                json.dumps(d["items"]),
                error,
                run.get("started_at"),
            ),
        )

    def close(self) -> None:
        self.inner.close()


__all__ = ["Delete", "RecordingStore", "connect", "record_effect"]
