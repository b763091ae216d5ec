"""Pausing a job (the watcher stays quiet about the windows it skips) and snoozing its alerts
(the watcher still evaluates, but notifies nobody until the snooze ends).

State lives in the job's status record, which the watcher already reads in its one query:

* ``pause``: ``{"id", "by", "at", "reason", "until"}`` or null, while the job is paused;
* ``last_pause``: the most recent finished pause (``at`` .. ``ended``), so windows that fell
  due inside it are not reported ``missed`` after the resume;
* ``snooze``: ``{"by", "at", "reason", "until"}`` or null; ``snoozed_alerts``: the conditions
  that fired while snoozed, announced once ("still firing after snooze") when it ends;
* ``pause_log``: the last :data:`LOG_SIZE` pause / resume / snooze entries (audit).

While a pause is active (``until`` null or in the future) the watcher raises neither
``missed`` nor ``skipping``; ``failing``, ``stuck``, ``suspicious``, ``slow`` and dead letters
still fire. The pause is also put on the job's overlap lock
(:class:`~cronwarden.model.records.LockRecord`): a scheduled fire's claim fails its fast path on
that lock and records the window *excused* (reason ``paused``) instead of running it, so
pausing costs the scheduler and the happy path nothing; runs by hand (``trigger``,
``backfill``, a redrive) still go through. The lock's lease ends with ``until``: an expired
pause stops blocking on its own.
"""

from __future__ import annotations

import getpass
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ..model.errors import CommitConflict
from ..model.ports import Create, Delete, Merge, Op, Store, Update
from ..model.records import LockRecord, iso, lock_key_of, parse_iso, status_key_of

LOG_SIZE = 20
_ROUNDS = 5
#: the furthest a pause's or a snooze's ``until`` may lie ahead of now (a pause with no end is
#: open-ended instead); further is taken for a typo (``--until 99999d``)
MAX_AHEAD = timedelta(days=3653)


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class PauseView:
    id: str
    by: str
    at: datetime | None
    reason: str
    until: datetime | None

    def active(self, now: datetime) -> bool:
        return self.until is None or self.until > now

    def describe(self) -> str:
        since = f" since {iso(self.at)}" if self.at else ""
        until = f" until {iso(self.until)}" if self.until else ""
        return f"paused by {self.by}{since}{until}: {self.reason}"


@dataclass(frozen=True)
class SnoozeView:
    by: str
    at: datetime | None
    reason: str
    until: datetime | None

    def active(self, now: datetime) -> bool:
        return self.until is not None and self.until > now


class AlreadyPaused(ValueError):
    """``pause(..., replace=False)`` of a job whose pause is in force; ``current`` is that pause."""

    def __init__(self, job: str, current: PauseView) -> None:
        self.job, self.current = job, current
        until = iso(current.until) if current.until is not None else "resumed"
        since = f" since {iso(current.at)}" if current.at else ""
        super().__init__(
            f"{job} is already paused by {current.by}{since} until {until}: {current.reason}"
        )


class AlreadySnoozed(ValueError):
    """``snooze(..., replace=False)`` of a job whose snooze is in force; ``current`` is it."""

    def __init__(self, job: str, current: SnoozeView) -> None:
        self.job, self.current = job, current
        since = f" since {iso(current.at)}" if current.at else ""
        until = iso(current.until) if current.until is not None else "?"
        super().__init__(
            f"{job}'s alerts are already snoozed by {current.by}{since} until {until}: "
            f"{current.reason or '(no reason given)'}"
        )


def _view(data: Any) -> dict[str, Any] | None:
    return data if isinstance(data, dict) else None


def pause_of(status: Mapping[str, Any]) -> PauseView | None:
    data = _view(status.get("pause"))
    if data is None:
        return None
    return PauseView(
        id=str(data.get("id") or ""),
        by=str(data.get("by") or "?"),
        at=parse_iso(data.get("at")),
        reason=str(data.get("reason") or ""),
        until=parse_iso(data.get("until")),
    )


def active_pause(status: Mapping[str, Any], now: datetime) -> PauseView | None:
    """The pause in force at ``now`` (None when not paused or the pause expired)."""
    pause = pause_of(status)
    return pause if pause is not None and pause.active(now) else None


def snooze_of(status: Mapping[str, Any]) -> SnoozeView | None:
    data = _view(status.get("snooze"))
    if data is None:
        return None
    return SnoozeView(
        by=str(data.get("by") or "?"),
        at=parse_iso(data.get("at")),
        reason=str(data.get("reason") or ""),
        until=parse_iso(data.get("until")),
    )


def excused(status: Mapping[str, Any], window: datetime, now: datetime) -> bool:
    """Whether ``window`` fell due while the job was paused (now, or in its last pause)."""
    pause = pause_of(status)
    if pause is not None and pause.at is not None and window >= pause.at:
        end = pause.until if pause.until is not None and pause.until <= now else now
        if window <= end:
            return True
    last = _view(status.get("last_pause")) or {}
    start, ended = parse_iso(last.get("at")), parse_iso(last.get("ended"))
    return start is not None and ended is not None and start <= window <= ended


def _check_until(until: datetime, now: datetime, what: str) -> None:
    """``until`` must lie in the future, at most :data:`MAX_AHEAD` ahead (ValueError)."""
    if until <= now:
        raise ValueError(f"until {iso(until)}: a {what} must end in the future")
    if until - now > MAX_AHEAD:
        raise ValueError(
            f"until {iso(until)}: a {what} may end at most {MAX_AHEAD.days} days ahead"
            + (" (leave out until for a pause that lasts until resumed)" if what == "pause" else "")
        )


def _log(status: Mapping[str, Any], entry: dict[str, Any]) -> list[dict[str, Any]]:
    previous = [e for e in status.get("pause_log") or [] if isinstance(e, dict)]
    return [*previous, entry][-LOG_SIZE:]


def _current(store: Store, job: str) -> dict[str, Any]:
    record = store.get(status_key_of(job))
    return dict(record.data) if record is not None else {}


def _lock_op(store: Store, job: str, pause: Mapping[str, Any] | None, now: datetime) -> Op | None:
    """The op that puts ``pause`` on the job's lock (None: takes it off), read just now.

    No lock, or one no live run holds: the pause holds it (created / replaced). A live run's
    lock: the pause rides on it, owner unchanged; the run's lease adopts it and hands the lock
    to the pause when the run finishes (:mod:`cronwarden.run.lease`)."""
    key = lock_key_of(job)
    stored = store.get(key)
    if stored is None:
        return (
            None if pause is None else Create(key, LockRecord.for_pause(job, pause, now).to_data())
        )
    lock = LockRecord.from_data(stored.data)
    if lock.held_by_pause or not lock.live(now):
        if pause is None:
            return Delete(key, stored.version)
        return Update(key, LockRecord.for_pause(job, pause, now).to_data(), stored.version)
    if pause is None and lock.pause is None:
        return None
    return Update(key, replace(lock, pause=pause).to_data(), stored.version)


def _commit_with_lock(
    store: Store, job: str, pause: Mapping[str, Any] | None, status_op: Merge | None, now: datetime
) -> None:
    """The status change and the lock change in one commit; read again when a run's lease
    wrote the lock meanwhile (it renews every third of its TTL)."""
    for _ in range(_ROUNDS - 1):
        try:
            _commit_once(store, job, pause, status_op, now)
            return
        except CommitConflict:
            continue
    _commit_once(store, job, pause, status_op, now)


def _commit_once(
    store: Store, job: str, pause: Mapping[str, Any] | None, status_op: Merge | None, now: datetime
) -> None:
    lock_op = _lock_op(store, job, pause, now)
    ops = [op for op in (lock_op, status_op) if op is not None]
    if ops:
        store.commit(ops)


def pause(
    store: Store,
    job: str,
    *,
    reason: str,
    by: str,
    now: datetime,
    until: datetime | None = None,
    replace: bool = True,
) -> PauseView:
    """Pause ``job``: its status records who, when, why and until when, and the job's lock
    carries the pause, so its scheduled fires are excused (state ``excused``, reason
    ``paused``) without running, while runs by hand still go through. Two reads (the audit
    log, the lock) and one commit. A window already running finishes first.

    A pause in force is replaced when ``replace`` (the default, as before; the windows it
    covered stay excused as ``last_pause``); with ``replace=False`` it raises
    :class:`AlreadyPaused` naming it instead. ValueError: an empty ``reason``, or ``until`` not
    in the future or more than :data:`MAX_AHEAD` ahead."""
    if not reason.strip():
        raise ValueError(f"reason {reason!r}: a pause needs a reason")
    if until is not None:
        _check_until(until, now, "pause")
    entry = {
        "id": secrets.token_hex(4),
        "by": by,
        "at": iso(now),
        "reason": reason.strip(),
        "until": iso(until) if until else None,
    }
    status = _current(store, job)
    fields: dict[str, Any] = {"pause": entry}
    logged: dict[str, Any] = {"action": "pause", **entry}
    previous = pause_of(status)
    if previous is not None:
        if not replace and previous.active(now):
            raise AlreadyPaused(job, previous)
        if previous.at is not None:  # windows it covered stay excused (see :func:`excused`)
            ended = min(now, previous.until) if previous.until is not None else now
            fields["last_pause"] = {"at": iso(previous.at), "ended": iso(ended)}
        if previous.active(now):
            logged["replaced"] = previous.id
    fields["pause_log"] = _log(status, logged)
    _commit_with_lock(store, job, entry, Merge(status_key_of(job), fields), now)
    view = pause_of({"pause": entry})
    assert view is not None
    return view


def resume(store: Store, job: str, *, by: str, now: datetime) -> PauseView | None:
    """End ``job``'s pause (status and lock in one commit); returns the pause that ended (None
    when it was not paused)."""
    status = _current(store, job)
    current = pause_of(status)
    if current is None:
        _commit_with_lock(store, job, None, None, now)  # a pause lock left without a status
        return None
    ended = min(now, current.until) if current.until is not None else now
    last = {"at": iso(current.at) if current.at else None, "ended": iso(ended)}
    entry = {"action": "resume", "id": current.id, "by": by, "at": iso(now)}
    fields = {"pause": None, "last_pause": last, "pause_log": _log(status, entry)}
    _commit_with_lock(store, job, None, Merge(status_key_of(job), fields), now)
    return current


def snooze(
    store: Store,
    job: str,
    *,
    until: datetime,
    by: str,
    now: datetime,
    reason: str = "",
    replace: bool = True,
) -> None:
    """Mute ``job``'s alerts until ``until`` (the watcher still evaluates and records them).

    A snooze in force is replaced when ``replace`` (the default, as before); with
    ``replace=False`` it raises :class:`AlreadySnoozed` naming it instead. ValueError:
    ``until`` not in the future or more than :data:`MAX_AHEAD` ahead."""
    _check_until(until, now, "snooze")
    entry = {"by": by, "at": iso(now), "reason": reason, "until": iso(until)}
    status = _current(store, job)
    current = snooze_of(status)
    if not replace and current is not None and current.active(now):
        raise AlreadySnoozed(job, current)
    fields = {"snooze": entry, "pause_log": _log(status, {"action": "snooze", **entry})}
    store.commit([Merge(status_key_of(job), fields)])


def unsnooze(store: Store, job: str, *, by: str, now: datetime) -> SnoozeView | None:
    """End the snooze now; the next check announces what is still firing. Returns the snooze
    that ended, or None (nothing written) when no snooze was in force (none, or it expired)."""
    status = _current(store, job)
    current = snooze_of(status)
    if current is None or not current.active(now):
        return None
    entry = {**(status.get("snooze") or {}), "until": iso(now)}
    log = _log(status, {"action": "unsnooze", "by": by, "at": iso(now)})
    store.commit([Merge(status_key_of(job), {"snooze": entry, "pause_log": log})])
    return current


__all__ = [
    "LOG_SIZE",
    "MAX_AHEAD",
    "AlreadyPaused",
    "AlreadySnoozed",
    "PauseView",
    "SnoozeView",
    "active_pause",
    "default_actor",
    "excused",
    "pause",
    "pause_of",
    "resume",
    "snooze",
    "snooze_of",
    "unsnooze",
]
