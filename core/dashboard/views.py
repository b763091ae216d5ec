"""What the dashboard shows, as plain JSON-able dicts: the HTML pages and the JSON API render the
same view models, so the API documents everything the page shows.

Every view reads the store (and the dead-letter queue) afresh; free text (errors, alert texts,
dead-letter bodies) passes through :func:`redacted` before it leaves this module.
"""

from __future__ import annotations

import functools
import importlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from ..jobs.definitions import Job, JobSet
from ..jobs.pause import active_pause
from ..model.logs import get_logger
from ..model.ports import ITEM, RUN, STATUS, DeadLetters, Store
from ..model.records import (
    DELIVERIES,
    LockRecord,
    StatusRecord,
    lock_key_of,
    parse_iso,
    run_key_of,
    status_key_of,
)
from ..model.redaction import redact
from ..model.runs import format_window, parse_window
from ..model.schedule import parse_instant
from ..run.ledger import read_items
from ..watch.outbox import UNROUTED, DeliveryPolicy, pending_of
from ..watch.watcher import JobHealth, Watcher
from . import _timeline
from ._triage import Triage

#: the one place the page's window accounting comes from (swap for
#: ``cronwarden.run.accounting.window_states`` when [windows] lands)


def window_states_of(
    store: Any, job: Any, start: datetime, end: datetime, now: datetime
) -> list[_timeline.WindowState]:
    """The timeline's cells from the model's window accounting
    (:func:`cronwarden.run.accounting.window_states`, the same the watcher judges gaps by), cut to
    the newest :data:`~cronwarden.dashboard._timeline.MAX_WINDOWS`; a success that broke its
    expectations shows as ``suspicious``."""
    from cronwarden.model.runs import run_key
    from cronwarden.run.accounting import window_states

    cells = []
    for state in window_states(store, job, start, min(end, now), now)[-_timeline.MAX_WINDOWS :]:
        run = state.run
        name = state.state.value
        if name == "succeeded" and run is not None and run.extra.get("suspicious"):
            name = "suspicious"
        cells.append(
            _timeline.WindowState(
                window=state.window,
                state=name,
                run_key=run_key(job.name, state.window),
                attempt=run.attempt if run is not None else 0,
                run_id=run.run_id if run is not None else None,
                duration_ms=run.duration_ms if run is not None else None,
                detail=state.detail,
            )
        )
    return cells


JOB_STATES = ("healthy", "alerting", "failing", "running", "paused", "pending")
MAX_DEAD_LETTERS = 1000  #: peeked per page (the depth is reported separately)
DEFAULT_RANGE = timedelta(days=2)
MAX_RANGE = timedelta(days=366)
RECENT_RUNS = 50  #: runs in the duration chart


class NotFound(LookupError):
    """The job, run or dead letter asked for does not exist (HTTP 404)."""


class BadRequest(ValueError):
    """A query parameter is malformed (HTTP 400)."""


@dataclass
class Dashboard:
    """What every view reads: the job definitions, the store, the dead-letter queue, a clock."""

    jobs: JobSet
    store: Store
    dead_letters: DeadLetters | None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    #: each job's duration baseline and the last success it was read at (see _baseline)
    baselines: dict[str, tuple[Any, Any]] = field(default_factory=dict, repr=False)

    def job(self, name: str) -> Job:
        job = self.jobs.get(name)
        if job is None:
            raise NotFound(f"unknown job {name!r}")
        return job


# -- helpers --------------------------------------------------------------------------------
def redacted(value: Any) -> Any:
    """``value`` with every string redacted (dict keys included), recursively."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(str(k)): redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v) for v in value]
    return value


def redacted_view(view: dict[str, Any]) -> dict[str, Any]:
    """A view model with every string redacted."""
    result: dict[str, Any] = redacted(view)
    return result


def instant(when: datetime | None, tz: ZoneInfo | None = None) -> dict[str, str] | None:
    """``{"utc": ISO, "local": ISO in tz, "zone": tz}`` (None for never)."""
    if when is None:
        return None
    utc_text, local_text, zone = _instant_texts(when, tz.key if tz is not None else "UTC")
    return {"utc": utc_text, "local": local_text, "zone": zone}


@functools.lru_cache(maxsize=8192)
def _instant_texts(when: datetime, zone: str) -> tuple[str, str, str]:
    """The formatted texts of an instant in a zone. Cached: the jobs of an overview share
    a few schedules, so 10,000 rows hold a few hundred distinct instants, and formatting one
    (two zone conversions, two isoformats) was a fifth of the overview's per-job cost."""
    return (
        when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        when.astimezone(ZoneInfo(zone)).isoformat(timespec="seconds"),
        zone,
    )


@functools.cache
def _baseline_of() -> Callable[..., Any] | None:
    try:
        return getattr(importlib.import_module("cronwarden.run.baseline"), "baseline_of", None)
    except ImportError:
        return None


def _baseline(
    job: Job, status: Mapping[str, Any], cache: dict[str, tuple[Any, Any]] | None = None
) -> dict[str, Any] | None:
    """The job's duration baseline when this version of cronwarden keeps one ([ops]).

    With ``cache`` (one entry a job): reused while the job's last success
    (``last_success_at``, ``duration_ms``) is unchanged. The ring slots the baseline reads are
    written only in a success's commit, which also sets ``last_success_at`` to that commit's
    time, so the same last success means the same slots; scanning the slots was half the
    overview's per-job cost."""
    marker = (status.get("last_success_at"), status.get("duration_ms"))
    cached = cache.get(job.name) if cache is not None else None
    if cached is not None and cached[0] == marker:
        found: dict[str, Any] | None = cached[1]
        return None if found is None else dict(found)
    baseline_of = _baseline_of()
    if baseline_of is None:
        return None
    base = baseline_of(job, status)
    value = (
        None
        if base is None
        else {"p50_ms": base.p50_ms, "p95_ms": base.p95_ms, "samples": base.samples}
    )
    if cache is not None:
        cache[job.name] = (marker, value)
    return None if value is None else dict(value)


def _job_state(health: JobHealth, now: datetime) -> str:
    return _state_of(health.status, bool(health.conditions), now)


def _paused(status: Mapping[str, Any], now: datetime) -> bool:
    """Whether a pause is in force (``cronwarden pause`` writes ``pause``; ``paused`` is the
    older field a status record may still carry)."""
    return bool(status.get("paused")) or active_pause(status, now) is not None


def _state_of(status: Mapping[str, Any], alerting: bool, now: datetime) -> str:
    """A row's state from the job's status record and whether a condition holds."""
    if _paused(status, now):
        return "paused"
    if alerting:
        return "alerting"
    if status.get("status") == "running":
        return "running"
    if status.get("status") in ("failed", "dead_lettered"):
        return "failing"  # the newest run failed though no alert fires (yet): never "healthy"
    if status.get("status"):
        return "healthy"
    return "pending"


def _dlq_by_job(letters: list[Any]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for letter in letters:
        key = str(letter.attributes.get("run_key") or "")
        job = str(letter.attributes.get("job") or key.partition(":")[0])
        counts[job] += 1
    return counts


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# -- overview -------------------------------------------------------------------------------
#: rows a page of the overview shows unless ``limit`` says otherwise
PAGE_SIZE = 100
#: row states that are problems (besides dead letters and undelivered alerts of any state)
PROBLEM_STATES = ("alerting", "failing")


@dataclass
class _Match:
    """A job that passed the overview's filters, before its row is built (only the rows of the
    page asked for are: building one is most of a row's cost)."""

    job: Job
    #: None for a job its record settles (:mod:`._triage`): judged only if its row is shown
    health: JobHealth | None
    status: dict[str, Any]
    state: str
    dead_letters: int
    undelivered: list[dict[str, Any]]

    @property
    def problem(self) -> bool:
        return self.state in PROBLEM_STATES or bool(self.dead_letters or self.undelivered)


def overview(
    dash: Dashboard,
    *,
    owner: str | None = None,
    tag: str | None = None,
    state: str | None = None,
    limit: int = PAGE_SIZE,
    page: int = 1,
    full: bool = False,
) -> dict[str, Any]:
    """One page of the jobs (filtered), from one query of every status record plus one
    dead-letter peek.

    The state counts cover every job. Only the jobs that can be problems are judged in full by
    the watcher's evaluation (:mod:`._triage`: due records, alert state, failed runs, dead
    letters, jobs no watcher has judged, ...); a job the watcher judged healthy and that is not
    due is counted from its record, and judged only when its row is on the page asked for.
    The counts and the order are those of judging every job (``full=True``, the reference the
    tests compare with). Problem jobs (alerting, last run failed, letters in the dead-letter
    queue, alerts no channel has received) come first, then the others, each in definition
    order: a problem is never behind a page of healthy jobs, and ``problem_jobs`` counts them.
    A page past the last is empty (its ``links`` lead back)."""
    if state is not None and state not in JOB_STATES:
        raise BadRequest(f"state must be one of {', '.join(JOB_STATES)}")
    if not 1 <= limit <= 100_000:
        raise BadRequest("limit must be between 1 and 100000")
    if page < 1:
        raise BadRequest("page must be 1 or more")
    now = dash.clock()
    watcher = Watcher(dash.jobs, dash.store, None, notifiers=[], clock=lambda: now, hooks=[])
    depth, per_job = None, Counter[str]()
    if dash.dead_letters is not None:
        depth = dash.dead_letters.dlq_depth()
        per_job = _dlq_by_job(dash.dead_letters.dlq_peek(MAX_DEAD_LETTERS)) if depth else per_job
    records = dash.store.query(STATUS)
    by_job = {r.key.job: r.data for r in records}
    if full:
        judge = None
    else:
        triage = Triage(now, watcher.horizon, watcher._always())
        judge = {
            job.name
            for job in dash.jobs
            if not triage.settled(job, by_job.get(job.name), per_job.get(job.name, 0))
        }
    judged, _ = watcher.evaluate(records, now, None, judge)
    health_of = {item.job.name: item for item in judged[: len(judge)]} if judge is not None else {}
    consumers = judged[len(judge) :] if judge is not None else []
    entries: list[tuple[Job, JobHealth | None, dict[str, Any]]]
    if judge is None:
        entries = [(item.job, item, item.status) for item in judged]
    else:
        entries = [(job, health_of.get(job.name), by_job.get(job.name, {})) for job in dash.jobs]
        entries += [(item.job, item, item.status) for item in consumers]
    matches, states = [], Counter[str]()
    for job, item, status in entries:
        row_state = _job_state(item, now) if item is not None else _state_of(status, False, now)
        states[row_state] += 1
        if owner and job.owner != owner:
            continue
        if tag and tag not in job.tags:
            continue
        if state and row_state != state:
            continue
        undelivered = _undelivered(job.name, status, now)
        matches.append(_Match(job, item, status, row_state, per_job.get(job.name, 0), undelivered))
    matches.sort(key=lambda m: not m.problem)  # stable: definition order within each group
    pages = max(1, -(-len(matches) // limit))
    first = (page - 1) * limit
    shown = matches[first : first + limit]
    unjudged = {m.job.name for m in shown if m.health is None}
    if unjudged:  # the rows shown are judged in full (their texts, next expected, ...)
        rows_health, _ = watcher.evaluate(records, now, None, unjudged)
        late = {item.job.name: item for item in rows_health[: len(unjudged)]}
        for m in shown:
            if m.health is None:
                m.health = late[m.job.name]
                if m.health.conditions:  # the record's promise broke: the row says so, loudly
                    m.state = _job_state(m.health, now)
                    get_logger("dashboard").error(
                        "overview: %s was counted as %s from its status record, but judging "
                        "it finds %s; the overview's counts are short of it until the "
                        "watcher's next check",
                        m.job.name,
                        _state_of(m.status, False, now),
                        ", ".join(sorted(kind.value for kind in m.health.conditions)),
                        extra={"event": "dashboard.triage_mismatch", "job": m.job.name},
                    )
    rows = [
        _job_row(m.health, m.state, m.dead_letters, dash.baselines, now, m.undelivered)
        for m in shown
        if m.health is not None
    ]
    filters = {"owner": owner, "tag": tag, "state": state, "limit": limit}
    return {
        "generated_at": instant(now),
        "dlq_depth": depth,
        "total_jobs": len(entries),
        "matching_jobs": len(matches),
        "problem_jobs": sum(1 for m in matches if m.problem),
        "states": {s: states.get(s, 0) for s in JOB_STATES},
        "owners": sorted({j.owner for j in dash.jobs if j.owner}),
        "tags": sorted({t for j in dash.jobs for t in j.tags}),
        "filters": filters,
        "undelivered_alerts": sum(len(m.undelivered) for m in matches),
        "page": page,
        "pages": pages,
        "page_size": limit,
        "first_row": first + 1 if rows else 0,
        "links": _page_links(filters, page, pages),
        "jobs": rows,
    }


def _page_links(filters: Mapping[str, Any], page: int, pages: int) -> dict[str, str | None]:
    """Relative links (a query string: the same for the page and the API) to the first, the
    previous, the next and the last page, with the same filters; None where there is none."""

    def link(number: int) -> str:
        query = {k: v for k, v in filters.items() if v not in (None, "")}
        if query.get("limit") == PAGE_SIZE:
            del query["limit"]
        return "?" + urlencode({**query, "page": number})

    return {
        "first": link(1),
        "prev": link(min(page, pages + 1) - 1) if page > 1 else None,
        "next": link(page + 1) if page < pages else None,
        "last": link(pages),
    }


def _job_row(
    item: JobHealth,
    state: str,
    dead_letters: int,
    baselines: dict[str, tuple[Any, Any]] | None = None,
    now: datetime | None = None,
    undelivered: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One overview row. Free text (alert texts, errors, descriptions, expectation reasons)
    is redacted here; the other strings are identifiers checked when the job was declared
    (name, owner, tags, cron, timezone), run keys and ISO times (redacting every string of
    10,000 rows cost 80% of the page's time)."""
    job, status = item.job, item.status
    tz = job.schedule.tz
    record = StatusRecord.from_data(status)
    suspicious = status.get("suspicious")
    return {
        "name": job.name,
        "description": redact(job.description),
        "owner": job.owner or None,
        "tags": list(job.tags),
        "schedule": job.schedule.cron,
        "timezone": job.schedule.timezone,
        "state": state,
        "last_status": record.status,
        "alerts": [
            {"kind": kind.value, "text": redact(alert.text)}
            for kind, alert in item.conditions.items()
        ],
        "last_success_window": instant(item.last_success_window, tz),
        "last_success_at": instant(item.last_success, tz),
        "next_expected": instant(item.expected_next, tz),
        "last_duration_ms": _int_or_none(status.get("duration_ms")),
        "baseline": _baseline(job, status, baselines),
        "consecutive_failures": record.consecutive_failures,
        "open_windows": _int_or_none(status.get("windows_open")),
        "dead_letters": dead_letters,
        "suspicious": [redact(str(s)) for s in suspicious]
        if isinstance(suspicious, list)
        else None,
        "paused": _paused(status, now) if now is not None else bool(status.get("paused")),
        "last_error": redact(record.error) if record.error else None,
        "last_run_key": status.get("run_key"),
        "undelivered": _undelivered(job.name, status, now) if undelivered is None else undelivered,
    }


def _undelivered(job: str, status: dict[str, Any], now: datetime | None) -> list[dict[str, Any]]:
    """The alerts of this job's outbox that have not reached a channel yet (the watcher's
    :mod:`~cronwarden.watch.outbox`): a channel that keeps failing shows here as well as in
    ``status``, ``check`` and the metrics."""
    if not status.get(DELIVERIES):
        return []
    pending = pending_of(job, status, now or datetime.now(UTC), DeliveryPolicy())
    return [
        {
            "channel": item.channel,
            "alert": item.alert,
            "attempts": item.attempts,
            "failing": item.failing,
            "error": redact(item.error) if item.error else None,
            "unrouted": item.channel == UNROUTED,
        }
        for item in pending
    ]


# -- timeline -------------------------------------------------------------------------------
def _parse_time(text: str | None, name: str) -> datetime | None:
    if text is None or text == "":
        return None
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise BadRequest(f"{name}: {exc}") from None


def timeline(
    dash: Dashboard, name: str, *, start: str | None = None, end: str | None = None
) -> dict[str, Any]:
    """One cell per due window of ``[start, end]`` (default: the last two days) and the
    durations of the job's recent runs."""
    job = dash.job(name)
    now = dash.clock()
    last = _parse_time(end, "end") or now
    first = _parse_time(start, "start") or last - DEFAULT_RANGE
    if first > last:
        raise BadRequest("start must not be after end")
    if last - first > MAX_RANGE:
        raise BadRequest("the range may span at most 366 days")
    tz = job.schedule.tz
    cells = window_states_of(dash.store, job, first, last, now)
    recent = dash.store.query(RUN, job.name)[-RECENT_RUNS:]
    durations = [
        {
            "window": r.key.id,
            "state": str(r.data.get("state") or "running"),
            "duration_ms": _int_or_none(r.data.get("duration_ms")),
        }
        for r in recent
    ]
    counts = Counter(cell.state for cell in cells)
    return redacted_view(
        {
            "job": name,
            "timezone": job.schedule.timezone,
            "schedule": job.schedule.cron,
            "owner": job.owner or None,
            "start": instant(first, tz),
            "end": instant(last, tz),
            "legend": list(_timeline.STATES),
            "counts": {s: counts.get(s, 0) for s in _timeline.STATES},
            "windows": [
                {
                    "window": format_window(cell.window),
                    "local": instant(cell.window, tz),
                    "state": cell.state,
                    "run_key": cell.run_key,
                    "attempt": cell.attempt,
                    "run_id": cell.run_id,
                    "duration_ms": cell.duration_ms,
                    "detail": cell.detail,
                }
                for cell in cells
            ],
            "durations": durations,
        }
    )


# -- run detail -----------------------------------------------------------------------------
def run_detail(dash: Dashboard, name: str, window: str) -> dict[str, Any]:
    """One window's run record, ledger summary, the job's lock holder and last skip."""
    job = dash.job(name)
    try:
        parse_window(window)
    except ValueError:
        raise BadRequest(f"window {window!r} is not of the form 2026-01-20T02:00Z") from None
    tz = job.schedule.tz
    record = dash.store.get(run_key_of(job.name, window))
    if record is None:
        raise NotFound(f"no run of {name} for window {window}")
    data = record.data
    items = read_items(dash.store.query(ITEM, job.name, prefix=f"{window}/"))
    ledger = Counter(view.item.state for view in items.values())
    lock = dash.store.get(lock_key_of(job.name))
    holder = None
    if lock is not None:
        held = LockRecord.from_data(lock.data)
        holder = {
            "holder": held.holder,
            "run_key": held.run_key,
            "live": held.live(dash.clock()),
            "lease_expires": instant(held.lease_expires, tz),
        }
    status = dash.store.get(status_key_of(job.name))
    status_data = status.data if status is not None else {}
    known = {
        "state",
        "attempt",
        "run_id",
        "previous_run_id",
        "owner",
        "fence",
        "reason",
        "error",
        "counters",
        "duration_ms",
        "started_at",
        "first_started_at",
        "finished_at",
        "lease_expires",
        "redrive",
        "budget_start",
        "excused",
        "excused_detail",
        "suspicious",
        "error_type",
        "job",
        "window",
        "run_key",
        "payload",
        "payload_fp",
        "checkpoint",
        "expire_at",
    }
    return redacted_view(
        {
            "job": name,
            "window": window,
            "window_time": instant(parse_window(window), tz),
            "run_key": f"{name}:{window}",
            "state": str(data.get("state") or "running"),
            "attempt": _int_or_none(data.get("attempt")),
            "redrives": _int_or_none(data.get("redrive")),
            "run_id": data.get("run_id"),
            "previous_run_id": data.get("previous_run_id"),
            "worker": data.get("owner"),
            "reason": data.get("reason"),
            "started_at": instant(parse_iso(data.get("started_at")), tz),
            "first_started_at": instant(parse_iso(data.get("first_started_at")), tz),
            "finished_at": instant(parse_iso(data.get("finished_at")), tz),
            "lease_expires": instant(parse_iso(data.get("lease_expires")), tz),
            "duration_ms": _int_or_none(data.get("duration_ms")),
            "counters": {str(k): v for k, v in dict(data.get("counters") or {}).items()},
            "error": data.get("error"),
            "excused": data.get("excused"),
            "excused_detail": data.get("excused_detail"),
            "suspicious": data.get("suspicious"),
            "ledger": {
                "items": len(items),
                "done": ledger.get("done", 0),
                "uncertain": ledger.get("pending", 0),
                "quarantined": ledger.get("quarantined", 0),
                "released": ledger.get("released", 0),
            },
            "lock": holder,
            "last_skip": {
                "reason": status_data.get("last_skip_reason"),
                "holder": status_data.get("last_skip_owner"),
                "at": instant(parse_iso(status_data.get("last_skip_at")), tz),
            }
            if status_data.get("last_skip_reason")
            else None,
            "other_fields": {k: v for k, v in data.items() if k not in known},
        }
    )


# -- dead letters ---------------------------------------------------------------------------
def _letter(letter: Any, *, full: bool) -> dict[str, Any]:
    key = str(letter.attributes.get("run_key") or "")
    job, _, window = key.partition(":")
    data: dict[str, Any] = {
        "message_id": letter.message_id,
        "run_key": key or None,
        "job": job or None,
        "window": window or None,
        "reason": letter.reason,
        "description": letter.description[:2000] if full else letter.description[:200],
        "attempts": letter.attempts,
        "dead_lettered_at": instant(letter.dead_lettered_at),
    }
    if full:
        data["attributes"] = {str(k): str(v) for k, v in letter.attributes.items()}
        data["body"] = bytes(letter.body).decode("utf-8", "replace")[:20_000]
    return data


def dead_letters(dash: Dashboard, *, limit: int = 100) -> dict[str, Any]:
    """The dead-letter queue's depth and its oldest ``limit`` letters (peeked, not consumed)."""
    if not 1 <= limit <= MAX_DEAD_LETTERS:
        raise BadRequest(f"limit must be between 1 and {MAX_DEAD_LETTERS}")
    if dash.dead_letters is None:
        return {"dlq_depth": None, "letters": []}
    depth = dash.dead_letters.dlq_depth()
    letters = dash.dead_letters.dlq_peek(limit) if depth else []
    return redacted_view({"dlq_depth": depth, "letters": [_letter(x, full=False) for x in letters]})


def dead_letter(dash: Dashboard, message_id: str) -> dict[str, Any]:
    if dash.dead_letters is not None:
        for letter in dash.dead_letters.dlq_peek(MAX_DEAD_LETTERS):
            if letter.message_id == message_id:
                return redacted_view(_letter(letter, full=True))
    raise NotFound(f"no dead letter with message id {message_id!r}")


__all__ = [
    "BadRequest",
    "Dashboard",
    "NotFound",
    "dead_letter",
    "dead_letters",
    "overview",
    "run_detail",
    "timeline",
    "window_states_of",
]
