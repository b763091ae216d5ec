"""Quarantined ledger items and their resolution by an operator.

A run that skips items left pending by a dead owner (``Uncertain.QUARANTINE``) records them in
its run record and in the job's status (``quarantined``: ``{window: [item keys]}``); the watcher
raises ``quarantined`` until every one is resolved here:

* ``done``: the side effect did happen; the item is marked done and never redone;
* ``redo``: it did not (or must be repeated, same idempotency key); the item is released and the
  window's run is reopened (its record moved from ``succeeded`` to ``failed``, reason
  ``ledger_redo``) so the next delivery of the window, which :func:`resolve` returns for the
  caller to enqueue, takes it over and does exactly the released items.

Each resolution is recorded on the item's own record (``resolution``: as, reason, by, at; the
ledger's pages are not rewritten: the record ranks just above the page that quarantined the
item, see :mod:`cronwarden.run.ledger`) in the same atomic commit that updates the status
(compare-and-set on the status record, retried on a race).
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..model.errors import CommitConflict, CronwardenError
from ..model.ports import STATUS, Create, Op, Store, Update
from ..model.records import QUARANTINED as STATUS_QUARANTINED
from ..model.records import (
    ItemRecord,
    RunRecord,
    StatusRecord,
    iso,
    item_key_of,
    run_key_of,
    status_key_of,
)
from ..model.runs import RunRequest, RunState, format_window, parse_window
from ..model.schedule import parse_instant
from .ledger import DONE, QUARANTINED, RELEASED, read_window_items

RESOLUTIONS = ("done", "redo")


class ResolutionRefused(CronwardenError):
    """The items cannot be resolved as asked (not quarantined, run still running, ...)."""


@dataclass(frozen=True)
class Listed:
    window: str
    item: ItemRecord
    resolution: dict[str, str] | None


@dataclass(frozen=True)
class Resolved:
    window: str
    items: list[str]
    as_: str
    rerun: RunRequest | None  #: for ``redo``: the request to enqueue so the window runs again


def operator() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no login name in a container
        user = "?"
    return f"{user}@{socket.gethostname()}"


def list_items(
    store: Store, job: str, *, window: str | None = None, state: str | None = QUARANTINED
) -> list[Listed]:
    """Ledger items of ``job`` (of one ``window``, as it appears in run keys: see
    :func:`window_text`), in ``state`` (``None``: every state), read from the ledger's pages
    and item records alike (:func:`~cronwarden.run.ledger.read_items`)."""
    found = []
    for found_window, views in sorted(read_window_items(store, job, window).items()):
        for view in views.values():
            if state is not None and view.item.state != state:
                continue
            found.append(Listed(found_window, view.item, view.resolution))
    return found


def window_text(text: str) -> str:
    """``text`` as the window appears in run keys (``2026-01-20T02:00Z``), from any ISO 8601
    form of the instant (``2026-01-20T02:00:00+00:00``; naive: UTC); text that is not an
    instant is left as it is (an event consumer's key). Raises ``ValueError`` for an instant
    off a minute boundary."""
    try:
        instant = parse_instant(text)
    except ValueError:
        return text
    return format_window(instant)


def window_on_record(store: Store, job: str, text: str) -> str:
    """The window ``text`` names among ``job``'s runs: ``text`` itself when a run of that key
    is on record (an event consumer's key that happens to read as a date stays as it is), else
    :func:`window_text` of it. One read."""
    if store.get(run_key_of(job, text)) is not None:
        return text
    return window_text(text)


#: how many of the jobs on record an "unknown job" answer names
KNOWN_SHOWN = 20


def nothing_on_record(store: Store, job: str, window: str | None = None) -> str | None:
    """Why a listing of ``job``'s items (of ``window``) found nothing, when the reason is that
    the store holds no such job or run (a mistyped name would otherwise read as "nothing to
    resolve"); None when the job (and the window's run) are on record. For an empty listing
    only: one read, two when ``window`` is given, and a query of the status records to name
    the jobs on record (cronwarden's own, ``_``-prefixed, left out) when ``job`` is not one."""
    if store.get(status_key_of(job)) is None:
        known = sorted(r.key.job for r in store.query(STATUS) if not r.key.job.startswith("_"))
        shown = ", ".join(known[:KNOWN_SHOWN]) + (", ..." if len(known) > KNOWN_SHOWN else "")
        return (
            f"this store holds no records of a job named {job!r} "
            f"({'jobs on record: ' + shown if known else 'no job has run here yet'})"
        )
    if window is not None and store.get(run_key_of(job, window)) is None:
        return f"this store holds no run of {job} for window {window}"
    return None


def resolve(
    store: Store,
    job: str,
    window: str,
    keys: Sequence[str],
    *,
    as_: str,
    reason: str,
    now: datetime,
    by: str | None = None,
    attempts: int = 5,
) -> Resolved:
    """Resolve quarantined ``keys`` of ``job``'s ``window`` (module docstring). One atomic
    commit: the items, the status's ``quarantined`` entry and, for ``redo``, the run record.
    Raises :class:`ResolutionRefused` with the reason when nothing can be done."""
    if as_ not in RESOLUTIONS:
        raise ResolutionRefused(f"--as must be one of {', '.join(RESOLUTIONS)}, got {as_!r}")
    if not reason.strip():
        raise ResolutionRefused("a resolution needs a --reason (it is recorded on each item)")
    parse_window(window)  # raises a clear error for a malformed window
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        raise ResolutionRefused("name at least one item")
    resolution = {"as": as_, "reason": reason, "by": by or operator(), "at": iso(now)}
    for _ in range(attempts):
        try:
            return _resolve_once(store, job, window, wanted, as_, resolution)
        except CommitConflict:
            continue  # the status or the run changed meanwhile: read again
    raise ResolutionRefused(f"{job} {window}: records kept changing; try again")


def _resolve_once(
    store: Store,
    job: str,
    window: str,
    wanted: list[str],
    as_: str,
    resolution: dict[str, str],
) -> Resolved:
    items = read_window_items(store, job, window).get(window, {})
    ops: list[Op] = []
    for key in wanted:
        found = items.get(key)
        state = None if found is None else found.item.state
        if found is None or state != QUARANTINED:
            raise ResolutionRefused(
                f"{job} {window}: item {key!r} is {state or 'unknown'}, not quarantined "
                f"(see `cronwarden ledger list {job} --window {window}`)"
            )
        # the item's own record, ranked just above the page (or record) that quarantined it:
        # a later owner's page outranks it again
        item = replace(found.item, state=DONE if as_ == "done" else RELEASED)
        data = {**item.to_data(), "resolution": resolution, "rank": [*found.rank[:2], 1]}
        if found.own is None:
            ops.append(Create(item_key_of(job, window, key), data))
        else:
            ops.append(Update(item_key_of(job, window, key), data, found.own.version))
    rerun = None
    if as_ == "redo":
        stored = store.get(run_key_of(job, window))
        if stored is None:
            raise ResolutionRefused(f"{job} {window}: no run record (expired?)")
        run = RunRecord.from_data(stored.data)
        if run.state is RunState.RUNNING:
            raise ResolutionRefused(
                f"{job} {window} is running (run {run.run_id}); resolve once it has ended"
            )
        if run.state is RunState.SUCCEEDED:  # reopen it: the next delivery takes it over
            reopened = run.with_(
                state=RunState.FAILED,
                error=f"ledger_redo: {len(wanted)} item(s) released by {resolution['by']}",
            )
            ops.append(Update(run_key_of(job, window), reopened.to_data(), stored.version))
        rerun = RunRequest(job, parse_window(window), reason="manual", payload=run.payload)
    status = store.get(status_key_of(job))
    if status is not None:
        left = StatusRecord.from_data(status.data).quarantined
        remaining = [k for k in left.get(window, []) if k not in wanted]
        if remaining:
            left[window] = remaining
        else:
            left.pop(window, None)
        ops.append(
            Update(status_key_of(job), {**status.data, STATUS_QUARANTINED: left}, status.version)
        )
    store.commit(ops)
    return Resolved(window, wanted, as_, rerun)
