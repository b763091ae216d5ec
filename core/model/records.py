"""The records the protocol keeps, as typed values with one codec each: the only module that
spells a record's field names.

* :class:`RunRecord` (kind ``run``): one run key's state, lease and fence;
* :class:`LockRecord` (kind ``lock``): the job's overlap lock while a run holds it;
* :class:`StatusRecord` (kind ``status``): the job's heartbeat, written by partial merges
  (the ``status_*`` functions build them) and read whole by the watcher and the CLI;
* :class:`ItemRecord` (kind ``item``): one ledger item, as the ledger reads it;
* :class:`ItemPage` (kind ``item`` too): the marks of one claimed ledger batch, the form the
  ledger writes (an :class:`ItemRecord` of its own is written only by an operator's resolution
  and was the form of every mark before pages).

``to_data`` gives the JSON dict a store holds; ``from_data`` reads one back, tolerating fields
an older or newer writer left (kept in ``extra`` and written back unchanged). Times are
ISO-8601 UTC text in the store (sortable, JSON-safe on every backend) and ``datetime`` here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from .ports import DUE_FIELDS, ITEM, LOCK, RUN, STATUS, Key
from .runs import RunState


def iso(when: datetime) -> str:
    if when.tzinfo is not UTC:  # the engine's clock gives UTC already: no conversion then
        when = when.astimezone(UTC)
    return when.isoformat(timespec="milliseconds")


def parse_iso(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _iso_or_none(when: datetime | None) -> str | None:
    return None if when is None else iso(when)


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def run_key_of(job: str, window_text: str) -> Key:
    return Key(RUN, job, window_text)


def lock_key_of(job: str, slot: str = "") -> Key:
    """The job's overlap lock; an event consumer's is per event key (its slot)."""
    return Key(LOCK, job, slot)


def status_key_of(job: str) -> Key:
    return Key(STATUS, job)


def item_key_of(job: str, window_text: str, item_key: str) -> Key:
    return Key(ITEM, job, f"{window_text}/{item_key}")


def expire_at(now: datetime, retention: timedelta) -> str:
    """The ``expire_at`` value stores use for production TTL policies."""
    return iso(now + retention)


OVERRAN = "overran"  #: status: the last finished run ran past its max_runtime
EXPIRE_AT = "expire_at"  #: the expiry field every backend's TTL policy reads

# -- run ------------------------------------------------------------------------------------
_RUN_TIMES = frozenset(
    ("lease_expires", "started_at", "first_started_at", "finished_at", "expire_at")
)
_OPTIONAL_RUN_FIELDS = frozenset(
    ("duration_ms", "previous_run_id", "excused", "excused_detail", "write_id")
)
_RUN_IF_TRUE = frozenset(("overran", "traceback"))  #: stored only when true / non-empty


@dataclass(frozen=True)
class RunRecord:
    """The run record: one per run key, carrying the lease (owner, expiry) and the fence."""

    job: str
    window: str
    run_key: str
    state: RunState = RunState.RUNNING
    owner: str = ""
    run_id: str = ""
    fence: int = 0
    attempt: int = 0
    budget_start: int = 0  #: attempts before the last redrive (a redrive restarts the budget)
    redrive: int = 0
    lease_expires: datetime | None = None
    started_at: datetime | None = None
    first_started_at: datetime | None = None
    finished_at: datetime | None = None
    expire_at: datetime | None = None
    checkpoint: Any = None
    payload: dict[str, Any] = field(default_factory=dict)
    payload_fp: str | None = None
    reason: str = "schedule"
    error: str | None = None
    counters: dict[str, int] = field(default_factory=dict)
    duration_ms: int | None = None
    previous_run_id: str | None = None
    #: why the window is accounted for without a success (state ``excused``): ``overlap_skip``,
    #: ``resolved`` (an operator's ``dlq resolve``), ``paused``; see ``excused_detail``
    excused: str | None = None
    excused_detail: str | None = None
    #: a fresh id per fenced write: after a commit of unknown outcome, finding it in the stored
    #: record proves that this very write landed (see :class:`~cronwarden.run.lease.Lease`)
    write_id: str | None = None
    #: ledger items this run quarantined or found quarantined (a success that needs a human)
    quarantined: list[str] = field(default_factory=list)
    overran: bool = False  #: the handler ran past the job's max_runtime (stored only when true)
    traceback: str | None = None  #: the last failure's redacted traceback tail (when it failed)
    extra: dict[str, Any] = field(default_factory=dict)  #: fields this version does not know

    def lease_live(self, now: datetime) -> bool:
        expires = self.lease_expires
        return self.state is RunState.RUNNING and expires is not None and expires > now

    @property
    def holder(self) -> str:
        return f"{self.owner} (run {self.run_id})"

    def with_(self, **changes: Any) -> RunRecord:
        if type(self) is not RunRecord or not _RUN_FIELD_SET.issuperset(changes):
            return replace(self, **changes)  # its errors for an unknown field
        # ``replace`` without re-running ``__init__`` (no defaults, no checks to apply): a
        # run's path copies its record three times
        copy = object.__new__(RunRecord)
        attributes = copy.__dict__
        attributes.update(self.__dict__)
        attributes.update(changes)
        return copy

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        attributes = self.__dict__
        for name in _RUN_FIELDS:
            value = attributes[name]
            if name in _RUN_TIMES:
                value = None if value is None else iso(value)
            elif name == "state":
                value = value.value
            elif name in _OPTIONAL_RUN_FIELDS and value is None:
                continue  # absent until a run finishes / is taken over / writes
            elif name in _RUN_IF_TRUE and not value:
                continue
            elif name == "quarantined":
                if not value:
                    continue
                value = list(value)
            data[name] = value
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunRecord:
        known = {spec.name for spec in fields(cls)} - {"extra"}
        state = data.get("state")
        return cls(
            job=str(data.get("job", "")),
            window=str(data.get("window", "")),
            run_key=str(data.get("run_key", "")),
            state=RunState(state) if state else RunState.RUNNING,
            owner=str(data.get("owner", "")),
            run_id=str(data.get("run_id", "")),
            fence=_int(data.get("fence")),
            attempt=_int(data.get("attempt")),
            budget_start=_int(data.get("budget_start")),
            redrive=_int(data.get("redrive")),
            lease_expires=parse_iso(data.get("lease_expires")),
            started_at=parse_iso(data.get("started_at")),
            first_started_at=parse_iso(data.get("first_started_at")),
            finished_at=parse_iso(data.get("finished_at")),
            expire_at=parse_iso(data.get("expire_at")),
            checkpoint=data.get("checkpoint"),
            payload=dict(data.get("payload") or {}),
            payload_fp=_str_or_none(data.get("payload_fp")),
            reason=str(data.get("reason") or "schedule"),
            error=_str_or_none(data.get("error")),
            counters=dict(data.get("counters") or {}),
            duration_ms=None if data.get("duration_ms") is None else _int(data["duration_ms"]),
            previous_run_id=_str_or_none(data.get("previous_run_id")),
            excused=_str_or_none(data.get("excused")),
            excused_detail=_str_or_none(data.get("excused_detail")),
            write_id=_str_or_none(data.get("write_id")),
            quarantined=[str(k) for k in data.get("quarantined") or []],
            overran=bool(data.get("overran")),
            traceback=_str_or_none(data.get("traceback")),
            extra={k: v for k, v in data.items() if k not in known},
        )


#: the run record's fields in order, ``extra`` aside (what ``to_data`` writes)
_RUN_FIELDS = tuple(spec.name for spec in fields(RunRecord) if spec.name != "extra")
_RUN_FIELD_SET = frozenset(_RUN_FIELDS) | {"extra"}


# -- lock -----------------------------------------------------------------------------------
#: the owner of a lock that a pause holds (``cronwarden pause``): no run holds it
PAUSE_OWNER = "paused"


@dataclass(frozen=True)
class LockRecord:
    """The job's overlap lock: which run holds it, until when.

    A paused job's lock is held by the pause (owner :data:`PAUSE_OWNER`, lease until the
    pause's end) or, when a run held the lock as the job was paused, carries the pause in
    ``pause`` (``{"id", "by", "at", "reason", "until"}``): the run keeps it and hands it to
    the pause when it finishes. So a scheduled fire of a paused job fails the claim's fast path
    on the lock it creates anyway, and the contended path, which reads the lock, excuses the
    window: pausing costs the happy path nothing.
    """

    owner: str
    run_id: str
    run_key: str
    window: str
    reason: str
    lease_expires: datetime | None
    pause: Mapping[str, Any] | None = None

    def live(self, now: datetime) -> bool:
        return self.lease_expires is not None and self.lease_expires > now

    @property
    def held_by_pause(self) -> bool:
        return self.owner == PAUSE_OWNER

    def pause_until(self) -> datetime | None:
        """When the pause this lock carries ends (None: until resumed, or no pause)."""
        return None if self.pause is None else parse_iso(self.pause.get("until"))

    def paused(self, now: datetime) -> bool:
        """Whether a pause is in force at ``now`` on this lock."""
        if self.pause is None:
            return False
        end = self.pause_until()
        return end is None or end > now

    @classmethod
    def for_pause(cls, job: str, pause: Mapping[str, Any], now: datetime) -> LockRecord:
        """The lock a pause holds while no run does: live until the pause's end."""
        end = parse_iso(pause.get("until")) or now + timedelta(days=365 * 100)
        return cls(
            owner=PAUSE_OWNER,
            run_id=str(pause.get("id") or ""),
            run_key=f"{job}:paused",
            window="",
            reason="paused",
            lease_expires=end,
            pause=dict(pause),
        )

    @property
    def holder(self) -> str:
        return f"{self.owner or '?'} (run {self.run_id or '?'}, {self.run_key or '?'})"

    def to_data(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "run_id": self.run_id,
            "run_key": self.run_key,
            "window": self.window,
            "reason": self.reason,
            "lease_expires": _iso_or_none(self.lease_expires),
            **({"pause": dict(self.pause)} if self.pause is not None else {}),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> LockRecord:
        pause = data.get("pause")
        return cls(
            owner=str(data.get("owner") or ""),
            run_id=str(data.get("run_id") or ""),
            run_key=str(data.get("run_key") or ""),
            window=str(data.get("window") or ""),
            reason=str(data.get("reason") or ""),
            lease_expires=parse_iso(data.get("lease_expires")),
            pause=dict(pause) if isinstance(pause, Mapping) else None,
        )


#: run record field (kept in ``RunRecord.extra``): the reason the run was dead-lettered with
#: (``MaxAttemptsExceeded``, ``PermanentError``, ``ContentRefused``), so that a delivery that
#: finds it dead-lettered already sends the first reason to the dead-letter queue again
DEAD_LETTER_REASON = "dead_letter_reason"


def dead_letter_reason_of(run: RunRecord, max_attempts: int) -> str:
    """The reason a dead-lettered ``run`` was dead-lettered with: the recorded one, or for a
    record written before it was recorded, what its attempts say."""
    recorded = run.extra.get(DEAD_LETTER_REASON)
    if isinstance(recorded, str) and recorded:
        return recorded
    return (
        "MaxAttemptsExceeded"
        if run.attempt - run.budget_start >= max_attempts
        else ("PermanentError")
    )


# -- status ---------------------------------------------------------------------------------
#: status fields the engine keeps as counters (Merge increments)
CONSECUTIVE_FAILURES = "consecutive_failures"
SKIPS_SINCE_SUCCESS = "skips_since_success"
DUPLICATES = "duplicates"
LAST_SUCCESS_WINDOW_TS = "last_success_window_ts"
FIRST_SEEN_AT = "first_seen_at"
# Window accounting (docs/protocol.md, "Window accounting"). The two counters ride on the
# commits a run already makes (increments; stores without ``atomic_increment`` leave them out
# and their watcher reads instead); the checkpoint is written by the watcher.
WINDOWS_RECORDED = "windows_recorded"  #: run records ever created for the job's windows
WINDOWS_OPEN = "windows_open"  #: windows claimed and not yet succeeded / excused
ACCOUNTED_THROUGH_TS = "accounted_through_ts"  #: every window <= this one is settled
ACCOUNTED_BASE = "accounted_base"  #: ``windows_recorded`` minus records of later windows
ALERTS = "alerts"
SUSPICIOUS = "suspicious"  #: what the newest success broke of its expectations (or null)
#: ``{window: [item keys]}``: quarantined ledger items awaiting ``cronwarden ledger resolve``
QUARANTINED = "quarantined"
#: the alert outbox: transitions not yet delivered to every channel (``cronwarden.watch.outbox``)
DELIVERIES = "deliveries"
# When the watcher must look at the job again (``Store.query_due``; docs/watcher.md, "What a
# check reads"): integer epoch seconds, or null.
#: written by the run's commits: when what the commit recorded becomes a problem if nothing
#: else happens (the claim: its run's max runtime and lease; a failure, a suspicious or
#: quarantined success, a skip: at once); a plain success clears it
DUE_AT = DUE_FIELDS[0]
#: written by the watcher: the next instant its verdict on the job may change by time alone
#: (the next window's deadline, an in-flight window's gap time), 0 while the job has alert
#: state to follow (every check reads it)
WATCH_DUE = DUE_FIELDS[1]


def due_ts(when: datetime) -> int:
    """``when`` as the integer epoch seconds of a due field (rounded down: never late)."""
    return int(when.timestamp() // 1)


def due_fields(when: datetime | None) -> dict[str, Any]:
    """The ``due_at`` field a run commit writes: ``when`` (None clears it)."""
    return {DUE_AT: None if when is None else due_ts(when)}


@dataclass(frozen=True)
class StatusRecord:
    """Read access to a job's status record (written field by field through merges)."""

    data: Mapping[str, Any]

    @property
    def status(self) -> str | None:
        return _str_or_none(self.data.get("status"))

    @property
    def run_id(self) -> str | None:
        return _str_or_none(self.data.get("run_id"))

    @property
    def started_at(self) -> datetime | None:
        return parse_iso(self.data.get("started_at"))

    @property
    def last_success_at(self) -> datetime | None:
        return parse_iso(self.data.get("last_success_at"))

    @property
    def last_success_window(self) -> datetime | None:
        value = self.data.get(LAST_SUCCESS_WINDOW_TS)
        return datetime.fromtimestamp(value, UTC) if isinstance(value, int) else None

    @property
    def first_seen_at(self) -> datetime | None:
        return parse_iso(self.data.get(FIRST_SEEN_AT))

    @property
    def consecutive_failures(self) -> int:
        return _int(self.data.get(CONSECUTIVE_FAILURES) or 0)

    @property
    def skips_since_success(self) -> int:
        return _int(self.data.get(SKIPS_SINCE_SUCCESS) or 0)

    @property
    def error(self) -> str | None:
        return _str_or_none(self.data.get("error_snippet") or self.data.get("last_error"))

    @property
    def quarantined(self) -> dict[str, list[str]]:
        """Unresolved quarantined ledger items by window (empty when none)."""
        value = self.data.get(QUARANTINED)
        if not isinstance(value, dict):
            return {}
        return {str(w): [str(k) for k in keys or []] for w, keys in value.items() if keys}

    @property
    def alerts(self) -> list[str]:
        return [str(a) for a in self.data.get(ALERTS) or []]

    @property
    def window(self) -> str | None:
        """The window of the latest claim (not necessarily the newest window)."""
        return _str_or_none(self.data.get("window"))

    @property
    def lease_expires(self) -> datetime | None:
        return parse_iso(self.data.get("lease_expires"))

    @property
    def windows_recorded(self) -> int | None:
        """None when the job's runs do not keep the accounting counters."""
        value = self.data.get(WINDOWS_RECORDED)
        return None if value is None else _int(value)

    @property
    def windows_open(self) -> int | None:
        value = self.data.get(WINDOWS_OPEN)
        return None if value is None else _int(value)

    @property
    def accounted_through(self) -> datetime | None:
        value = self.data.get(ACCOUNTED_THROUGH_TS)
        return datetime.fromtimestamp(value, UTC) if isinstance(value, int) else None

    @property
    def accounted_base(self) -> int:
        return _int(self.data.get(ACCOUNTED_BASE) or 0)

    @property
    def suspicious(self) -> list[str]:
        """Why the newest success looks wrong (empty: it met its expectations)."""
        return [str(r) for r in self.data.get(SUSPICIOUS) or []]

    @property
    def suspicious_run_key(self) -> str | None:
        return _str_or_none(self.data.get("suspicious_run_key"))

    @property
    def duration_ms(self) -> int | None:
        value = self.data.get("duration_ms")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> StatusRecord:
        return cls(data)


def status_started(
    job: str, run: RunRecord, now: datetime, due: datetime | None = None
) -> dict[str, Any]:
    """Status fields of a run that was just claimed; ``due``: when it becomes a problem if it
    never finishes (its max runtime, its lease's gap time), written as ``due_at``."""
    fields = {
        "job_name": job,
        "run_id": run.run_id,
        "run_key": run.run_key,
        "window": run.window,
        "status": RunState.RUNNING.value,
        "started_at": iso(now),
        "finished_at": None,
        "duration_ms": None,
        "attempt": run.attempt,
        "owner": run.owner,
        "lease_expires": _iso_or_none(run.lease_expires),
    }
    if due is not None:
        fields.update(due_fields(due))
    return fields


def status_succeeded(
    run: RunRecord, now: datetime, duration_ms: int, counters: Mapping[str, int]
) -> dict[str, Any]:
    """Status fields of a completed run (the success window is written by the caller)."""
    return {
        "status": RunState.SUCCEEDED.value,
        "run_id": run.run_id,
        "run_key": run.run_key,
        "finished_at": iso(now),
        "duration_ms": duration_ms,
        "error_snippet": None,
        "last_success_at": iso(now),
        OVERRAN: run.overran,
        CONSECUTIVE_FAILURES: 0,
        SKIPS_SINCE_SUCCESS: 0,
        "counters": dict(counters),
        DUE_AT: None,  # the run ended: its max runtime and lease are no longer a deadline
    }


def status_suspicious(run: RunRecord, reasons: list[str], now: datetime) -> dict[str, Any]:
    """Status fields a newest-window success writes about its expectations: the reasons it
    broke (``suspicious``, null when it met them all), and which run and when."""
    if not reasons:
        return {SUSPICIOUS: None}
    return {
        SUSPICIOUS: list(reasons),
        "suspicious_run_key": run.run_key,
        "suspicious_window": run.window,
        "suspicious_at": iso(now),
    }


def run_suspicious(run: RunRecord, reasons: list[str]) -> RunRecord:
    """``run`` marked *succeeded, suspicious* with ``reasons`` (kept in the run record)."""
    return run.with_(extra={**run.extra, SUSPICIOUS: list(reasons)})


def status_failed(
    run: RunRecord, state: RunState, now: datetime, duration_ms: int, error: str, error_type: str
) -> dict[str, Any]:
    """Status fields of a failed or dead-lettered run (``consecutive_failures`` is raised by
    the caller as an increment)."""
    return {
        "status": state.value,
        "run_id": run.run_id,
        "run_key": run.run_key,
        "finished_at": iso(now),
        "duration_ms": duration_ms,
        "error_snippet": error,
        "error_type": error_type,
        OVERRAN: run.overran,
        DUE_AT: None,
        WATCH_DUE: 0,  # a failure the watcher must judge at its next check
    }


def status_excused(run: RunRecord, now: datetime) -> dict[str, Any]:
    """Status fields of a window excused without running (overlap skip, resolve, pause)."""
    return {
        "last_excused_window": run.window,
        "last_excused_reason": run.excused,
        "last_excused_at": iso(now),
    }


def status_skipped(reason: str, holder: str, now: datetime) -> dict[str, Any]:
    return {
        "last_skip_reason": reason,
        "last_skip_at": iso(now),
        "last_skip_owner": holder,
        WATCH_DUE: 0,  # a skip counts towards ``skipping``: judged at the next check
    }


def status_overlap_failed(error: str, now: datetime) -> dict[str, Any]:
    return {
        "last_error": error,
        "last_skip_reason": "overlap_failed",
        "last_skip_at": iso(now),
        WATCH_DUE: 0,
    }


# -- ledger items ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ItemRecord:
    """One item of a run's ledger: ``state`` is pending, done, released or quarantined."""

    key: str
    fingerprint: str
    state: str
    run_id: str
    expire_at: datetime | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "key": self.key,
            "fp": self.fingerprint,
            "state": self.state,
            "run_id": self.run_id,
        }
        if self.expire_at is not None:
            data[EXPIRE_AT] = iso(self.expire_at)
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ItemRecord:
        return cls(
            key=str(data.get("key")),
            fingerprint=str(data.get("fp")),
            state=str(data.get("state")),
            run_id=str(data.get("run_id")),
            expire_at=parse_iso(data.get(EXPIRE_AT)),
        )


def item_state(state: str) -> dict[str, Any]:
    """The fields of a mark that only moves an item to ``state`` (its record exists)."""
    return {"state": state}


# -- ledger pages ---------------------------------------------------------------------------
#: ids of page records: ``<window>/~page~<fence>.<seq>`` (item keys may not start with it)
PAGE_TAG = "~page~"
STATE_CODES = {"pending": "p", "done": "d", "released": "r", "quarantined": "q"}
CODE_STATES = {code: state for state, code in STATE_CODES.items()}
OLDEST_RANK = (-1, -1, 0)  #: rank of an item record written before pages (no ``rank`` field)


def page_key_of(job: str, window_text: str, fence: int, seq: int) -> Key:
    """One page of the ledger of ``job``'s window: the ``seq``-th batch claimed by the owner
    holding ``fence`` (ids sort by fence, then seq)."""
    return Key(ITEM, job, f"{window_text}/{PAGE_TAG}{fence:010d}.{seq:06d}")


def sibling_page_key(page: Key, seq: int) -> Key:
    """The key of the ``seq``-th page of the owner (fence) that wrote ``page``."""
    head, _, _ = page.id.rpartition(".")
    return Key(page.kind, page.job, f"{head}.{seq:06d}")


#: a page's field holding the later states of earlier pages of the same owner, ``{seq: states}``
#: (written with the page instead of a states update of each: one record write per batch)
CARRIED = "carried"


def merge_states(own: str, later: str) -> str:
    """A page's states, ``own`` with the marks of ``later`` (a carried copy) applied: a
    settled code (done, released, quarantined) wins over *pending*; settled codes never change."""
    if len(later) != len(own):
        raise ValueError(f"carried states of {len(later)} items for a page of {len(own)}")
    if own == later:
        return own
    pending = STATE_CODES["pending"]
    return "".join(
        mine if other == pending else other for mine, other in zip(own, later, strict=True)
    )


def carried_states(pages: Iterable[Mapping[str, Any]]) -> dict[tuple[int, int], str]:
    """The states carried by ``pages`` (data of page records of one window) for earlier
    pages, by ``(fence, seq)`` of the page they belong to (several copies merged)."""
    found: dict[tuple[int, int], str] = {}
    for data in pages:
        carried = data.get(CARRIED)
        if not isinstance(carried, Mapping) or not carried:
            continue
        fence = _int(data.get("fence"), -1)
        for seq_text, states in carried.items():
            where = (fence, _int(seq_text, -1))
            text = str(states)
            seen = found.get(where)
            found[where] = text if seen is None else merge_states(seen, text)
    return found


def is_page(data: Mapping[str, Any]) -> bool:
    """True for the data of an :class:`ItemPage` (else an :class:`ItemRecord`)."""
    return "keys" in data and "states" in data


@dataclass(frozen=True)
class ItemPage:
    """The marks of one claimed batch: its items' keys, fingerprints and states (one code per
    item, :data:`STATE_CODES`), written by the owner holding ``fence`` as its ``seq``-th page.

    Stored as ``keys`` and ``fps`` (lists, in order), ``states`` (text), ``fence``, ``seq``,
    ``run_id`` and ``expire_at``. A page is written whole when its batch is claimed (or, if
    that write never landed, when its items are released) and then only its ``states`` field
    changes (a :class:`~cronwarden.model.ports.Merge`), or a later page of the same owner carries
    its
    new states (:data:`CARRIED`; a reader applies them with :func:`carried_states`). When
    several records mention one item, the one of highest :meth:`rank` is its state (later
    owners, then operator resolutions win).
    """

    fence: int
    seq: int
    run_id: str
    keys: list[str]
    fps: list[str]
    states: str
    expire_at: datetime | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "fence": self.fence,
            "seq": self.seq,
            "run_id": self.run_id,
            "keys": self.keys,
            "fps": self.fps,
            "states": self.states,
        }
        if self.expire_at is not None:
            data[EXPIRE_AT] = iso(self.expire_at)
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ItemPage:
        keys = [str(k) for k in data.get("keys") or ()]
        fps = [str(f) for f in data.get("fps") or ()]
        states = str(data.get("states") or "")
        if not (len(keys) == len(fps) == len(states)):
            raise ValueError(
                f"ledger page with {len(keys)} keys, {len(fps)} fingerprints and "
                f"{len(states)} states"
            )
        return cls(
            fence=_int(data.get("fence"), -1),
            seq=_int(data.get("seq"), -1),
            run_id=str(data.get("run_id")),
            keys=keys,
            fps=fps,
            states=states,
            expire_at=parse_iso(data.get(EXPIRE_AT)),
        )

    @property
    def rank(self) -> tuple[int, int, int]:
        return (self.fence, self.seq, 0)

    def with_carried(self, later: str) -> ItemPage:
        """This page with the marks a later page of its owner carried for it applied."""
        return replace(self, states=merge_states(self.states, later))

    def items(self) -> list[ItemRecord]:
        """Its items, as item records (an unknown state code reads as ``pending``: the
        cautious reading, an uncertain item)."""
        return [
            ItemRecord(key, fp, CODE_STATES.get(code, "pending"), self.run_id, self.expire_at)
            for key, fp, code in zip(self.keys, self.fps, self.states, strict=True)
        ]


def item_rank(data: Mapping[str, Any]) -> tuple[int, int, int]:
    """The rank of an item record: a resolution ranks just above the record it resolved;
    records written before pages rank lowest."""
    rank = data.get("rank")
    if isinstance(rank, list) and len(rank) == 3:
        return (_int(rank[0], -1), _int(rank[1], -1), _int(rank[2]))
    return OLDEST_RANK


def page_states(op_fields: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """The marks a write of page fields carries, as ``(item key, state)``: every item of a
    whole page; for a ``states``-only update and the states a new page carries for earlier
    ones (key ``None``), the *done* / *released* states they set (such updates never set
    *pending* or *quarantined*)."""
    states = str(op_fields.get("states") or "")
    keys = op_fields.get("keys")
    carried = op_fields.get(CARRIED)
    later = "".join(str(v) for v in carried.values()) if isinstance(carried, Mapping) else ""
    settled: list[tuple[str | None, str]] = [
        (None, CODE_STATES[c]) for c in dict.fromkeys(later) if c in ("d", "r")
    ]
    if isinstance(keys, list):
        whole: list[tuple[str | None, str]] = [
            (str(k), CODE_STATES.get(c, "pending")) for k, c in zip(keys, states, strict=False)
        ]
        return whole + settled
    return [(None, CODE_STATES[c]) for c in dict.fromkeys(states) if c in ("d", "r")]
