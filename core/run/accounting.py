"""Window accounting: where every due window of a job stands.

"A window never ends silently" is a statement about *every due window*, not about the last
success. At any moment each due window of a job is exactly one of:

* ``succeeded``;
* in flight: ``queued`` (no run record yet, within its grace), ``running`` (a run record whose
  lease has not run out, or ran out so recently that a redelivery is still due), ``failed``
  (a retry is due);
* ``dead_lettered`` (alerted until it is redriven and succeeds, or resolved by an operator);
* ``excused`` (a scheduled fire skipped by the job's declared overlap policy, a dead letter an
  operator resolved with a reason, or, once pausing exists, a paused window: the run record's
  ``excused`` field says which);
* ``gap``: none of these. The watcher raises ``missed`` naming the oldest gap.

**When a window becomes a gap** (``grace`` = ``Liveness.grace``, default the schedule
interval at the window):

* no run record: at ``window + grace``;
* running: at ``lease_expires + grace`` (never while a lease is live, so never while a run is
  within its max runtime);
* failed: at ``finished_at + backoff(attempt) + max_runtime + grace`` (the retry may wait
  behind another window's run for up to its max runtime).

:func:`window_states` (one query) is the public view a dashboard or the CLI uses;
:func:`account` is what the watcher does per job: it decides from the job's status record
alone whether anything is open (the counters the run commits keep, see
:mod:`cronwarden.model.records`) and reads the run records only when it must.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..jobs.definitions import Job
from ..model.ports import RUN, Store
from ..model.records import RunRecord, StatusRecord
from ..model.runs import RunState, format_window, parse_window
from ..model.schedule import Schedule, utc

#: windows the watcher walks per job and check at most; an older backlog is read in pages
MAX_WINDOWS_PER_CHECK = 2000
#: the watcher moves a healthy job's checkpoint forward after this many settled windows
CHECKPOINT_EVERY = 16


class WindowStatus(enum.StrEnum):
    SUCCEEDED = "succeeded"
    RUNNING = "running"
    FAILED = "failed"  #: failed, a retry is due
    DEAD_LETTERED = "dead_lettered"
    EXCUSED = "excused"
    QUEUED = "queued"  #: no run record yet, within its grace
    GAP = "gap"  #: unaccounted for: the watcher raises ``missed``

    @property
    def settled(self) -> bool:
        return self in (WindowStatus.SUCCEEDED, WindowStatus.EXCUSED)

    @property
    def in_flight(self) -> bool:
        return self in (WindowStatus.RUNNING, WindowStatus.FAILED, WindowStatus.QUEUED)


@dataclass(frozen=True)
class WindowState:
    """One due window of a job and where it stands (see the module doc)."""

    job: str
    window: datetime
    state: WindowStatus
    run: RunRecord | None = None
    #: when an unsettled window becomes (or became) a gap; None once settled or dead-lettered
    gap_at: datetime | None = None
    detail: str = ""

    @property
    def window_text(self) -> str:
        return format_window(self.window)


def grace_of(job: Job, window: datetime) -> timedelta:
    """The job's grace for ``window``: ``Liveness.grace``, default the schedule interval."""
    return job.grace_at(window)


def window_state(
    job: Job,
    window: datetime,
    run: RunRecord | None,
    now: datetime,
    *,
    ticking: bool = False,
) -> WindowState:
    """Where ``window`` stands, given its run record (None: there is none). ``ticking``: a
    later window of the job has a run record (its trigger fires), so a job with a catch-up
    policy will enqueue a missing window while it is within the policy's reach."""
    grace = grace_of(job, window)
    name = job.name
    within = job.catch_up.within
    if run is None and ticking and within is not None and now < window + within:
        return WindowState(
            name, window, WindowStatus.QUEUED, None, window + within, "catch-up will enqueue it"
        )
    if run is None:
        gap_at = window + grace
        state = WindowStatus.GAP if now >= gap_at else WindowStatus.QUEUED
        detail = "never ran" if state is WindowStatus.GAP else "not claimed yet"
        return WindowState(name, window, state, None, gap_at, detail)
    if run.state is RunState.SUCCEEDED:
        return WindowState(name, window, WindowStatus.SUCCEEDED, run)
    if run.state is RunState.EXCUSED:
        detail = run.excused or "excused"
        if run.excused_detail:
            detail += f": {run.excused_detail}"
        return WindowState(name, window, WindowStatus.EXCUSED, run, detail=detail)
    if run.state is RunState.DEAD_LETTERED:
        return WindowState(
            name, window, WindowStatus.DEAD_LETTERED, run, detail=run.error or "dead-lettered"
        )
    if run.state is RunState.RUNNING:
        expires = run.lease_expires or run.started_at or window
        gap_at = expires + grace
        if run.lease_live(now) or now < gap_at:
            live = run.lease_live(now)
            detail = f"run {run.run_id} " + ("holds a live lease" if live else "lease ran out")
            return WindowState(name, window, WindowStatus.RUNNING, run, gap_at, detail)
        return WindowState(
            name, window, WindowStatus.GAP, run, gap_at, "its lease ran out and no retry came"
        )
    finished = run.finished_at or run.started_at or window
    used = max(1, run.attempt - run.budget_start)
    gap_at = finished + job.retry.backoff(used) + job.max_runtime + grace
    if now < gap_at:
        return WindowState(name, window, WindowStatus.FAILED, run, gap_at, run.error or "")
    return WindowState(name, window, WindowStatus.GAP, run, gap_at, "failed and no retry came")


def _due_windows(job: Job, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """Windows ``start <= w <= end``, oldest first, at most ``limit``. Steps through the
    schedule's cached stepping (a fleet shares a few schedules, and the watcher asks the same
    questions for every job of one)."""
    schedule = job.schedule
    window = schedule.floor(start)
    if window < start:
        window = schedule.next_after(window)
    windows: list[datetime] = []
    while window <= end and len(windows) < limit:
        windows.append(window)
        window = schedule.next_after(window)
    return windows


def _runs(store: Store, job: Job, start: datetime, end: datetime) -> dict[str, RunRecord]:
    records = store.query(
        RUN, job.name, start=format_window(start), end=format_window(end) + "\x7f"
    )
    return {r.key.id: RunRecord.from_data(r.data) for r in records}


def window_states(
    store: Store,
    job: Job,
    start: datetime,
    end: datetime,
    now: datetime,
    *,
    limit: int = 100_000,
) -> list[WindowState]:
    """The state of each due window of ``job`` in ``[start, min(end, now)]``, oldest first,
    from one query of the job's run records. At most ``limit`` windows (the oldest)."""
    start, end, now = utc(start), utc(end), utc(now)
    windows = _due_windows(job, start, min(end, now), limit)
    if not windows:
        return []
    runs = _runs(store, job, windows[0], windows[-1])
    return _states(job, windows, runs, now)


def _states(
    job: Job, windows: list[datetime], runs: Mapping[str, RunRecord], now: datetime
) -> list[WindowState]:
    newest = max(runs, default="")
    return [
        window_state(job, w, runs.get(format_window(w)), now, ticking=format_window(w) < newest)
        for w in windows
    ]


# -- what the watcher does per job --------------------------------------------------------------


@dataclass
class Accounting:
    """The watcher's finding for one job: the states it knows, and the checkpoint to keep."""

    states: list[WindowState] = field(default_factory=list)
    read: bool = False  #: the run records were read (one bounded query)
    #: (accounted_through, base) to write back when they moved, else None
    checkpoint: tuple[datetime, int] | None = None

    def of(self, status: WindowStatus) -> list[WindowState]:
        return [s for s in self.states if s.state is status]

    @property
    def gaps(self) -> list[WindowState]:
        return self.of(WindowStatus.GAP)

    @property
    def dead_letters(self) -> list[WindowState]:
        return self.of(WindowStatus.DEAD_LETTERED)


class Moment:
    """What every job of one check asks of its schedule at ``now``, answered once per distinct
    schedule (a fleet shares a few): the latest due window, the next one, the interval at
    ``now`` and the first window within ``horizon``. The answers are exactly those of the
    :class:`~cronwarden.model.schedule.Schedule` methods; only the repetition is saved."""

    __slots__ = ("_answers", "_by_id", "_steps", "horizon", "now")

    def __init__(self, now: datetime, horizon: timedelta) -> None:
        self.now = now
        self.horizon = horizon
        self._answers: dict[Schedule, tuple[datetime, datetime, timedelta, datetime]] = {}
        #: the same answers by the schedule object's identity (a job asks about its own
        #: schedule several times; equal schedules of different jobs share ``_answers``)
        self._by_id: dict[int, tuple[Schedule, tuple[datetime, datetime, timedelta, datetime]]]
        self._by_id = {}
        self._steps: dict[tuple[Schedule, datetime], datetime] = {}

    def answers(self, schedule: Schedule) -> tuple[datetime, datetime, timedelta, datetime]:
        """``(latest, next_after, interval at now, horizon_start)`` of ``schedule``, in one
        look-up (the methods below, each by itself)."""
        entry = self._by_id.get(id(schedule))
        if entry is not None and entry[0] is schedule:
            return entry[1]
        answers = self._of(schedule)
        self._by_id[id(schedule)] = (schedule, answers)
        return answers

    def step(self, schedule: Schedule, when: datetime) -> datetime:
        """``schedule.next_after(when)``, asked once per schedule and instant in this check
        (jobs of one schedule share their checkpoint window)."""
        key = (schedule, when)
        answer = self._steps.get(key)
        if answer is None:
            answer = self._steps[key] = schedule.next_after(when)
        return answer

    def _of(self, schedule: Schedule) -> tuple[datetime, datetime, timedelta, datetime]:
        answers = self._answers.get(schedule)
        if answers is None:
            now = self.now
            answers = (
                schedule.floor(now),
                schedule.next_after(now),
                schedule.interval_at(now),
                schedule.next_after(now - self.horizon),
            )
            self._answers[schedule] = answers
        return answers

    def latest(self, schedule: Schedule) -> datetime:
        """``schedule.floor(now)``."""
        return self._of(schedule)[0]

    def next_after(self, schedule: Schedule) -> datetime:
        """``schedule.next_after(now)``."""
        return self._of(schedule)[1]

    def grace(self, job: Job) -> timedelta:
        """``job.grace_at(now)``."""
        grace = job.liveness.grace
        return grace if isinstance(grace, timedelta) else self._of(job.schedule)[2]

    def horizon_start(self, schedule: Schedule) -> datetime:
        """``schedule.next_after(now - horizon)``."""
        return self._of(schedule)[3]


def _start(job: Job, record: StatusRecord, now: datetime, horizon: timedelta) -> datetime | None:
    """The first window the job owes when it has no checkpoint yet: the first after the
    watcher first saw it, or after the horizon's start when runs are on record (found by the
    read). None: nothing owed yet (first sight, no run on record)."""
    first_seen = record.first_seen_at
    if first_seen is None:
        return None
    return max(job.schedule.next_after(first_seen), job.schedule.next_after(now - horizon))


def _has_runs(record: StatusRecord) -> bool:
    return (
        record.window is not None
        or record.last_success_window is not None
        or bool(record.windows_recorded)
        or record.data.get("last_excused_window") is not None
    )


def account(
    store: Store,
    job: Job,
    status: Mapping[str, object],
    now: datetime,
    *,
    horizon: timedelta,
    moment: Moment | None = None,
) -> Accounting:
    """Account for ``job``'s due windows from its status record; read its run records (one
    bounded query) only when the status does not prove every window since the checkpoint
    settled or in flight.

    The proof: ``windows_open`` is 0 (or 1, held by the status's own run with a live lease)
    and ``windows_recorded - accounted_base`` equals the number of windows since the
    checkpoint (every window has a record, every record is settled).

    ``moment``: the check's shared schedule answers at ``now`` (same ``now`` and ``horizon``);
    a cache only, the result is the same without it."""
    record = StatusRecord.from_data(status)
    through = record.accounted_through
    if moment is None or moment.now != now or moment.horizon != horizon:
        moment = Moment(now, horizon)
    latest, _, _, horizon_start = moment.answers(job.schedule)
    if through is not None:
        start = max(moment.step(job.schedule, through), horizon_start)
    elif _has_runs(record):
        start = horizon_start
    else:
        owed_from = _start(job, record, now, horizon)
        if owed_from is None or owed_from > latest:
            return Accounting()
        windows = _due_windows(job, owed_from, latest, MAX_WINDOWS_PER_CHECK)
        return Accounting([window_state(job, w, None, now) for w in windows])
    if start > latest:
        return Accounting()
    recorded, open_ = record.windows_recorded, record.windows_open
    if through is not None and recorded is not None and open_ is not None:
        windows = _due_windows(job, start, latest, MAX_WINDOWS_PER_CHECK)
        since = recorded - record.accounted_base
        live_run = (
            open_ == 1
            and record.status == RunState.RUNNING.value
            and (record.lease_expires or now) > now
        )
        if since == len(windows) and (open_ == 0 or live_run):
            checkpoint = None
            if open_ == 0 and len(windows) >= CHECKPOINT_EVERY:
                checkpoint = (windows[-1], recorded)
            return Accounting(checkpoint=checkpoint)
    elif through is not None and _latest_claim_settles(job, record, start, latest, now):
        return Accounting()
    runs = _runs(store, job, start, latest)
    if through is None:
        # first accounting of a job with runs on record: owed from its oldest run (within
        # the horizon) or from when the watcher first saw it, whichever is earlier
        candidates = [job.schedule.floor(parse_window(w)) for w in runs]
        first_seen = record.first_seen_at
        if first_seen is not None:
            candidates.append(job.schedule.next_after(first_seen))
        start = max(min(candidates, default=latest), start)
    windows = _due_windows(job, start, latest, MAX_WINDOWS_PER_CHECK)
    states = _states(job, windows, runs, now)
    return Accounting(states, True, _checkpoint(states, runs, record, through))


def _latest_claim_settles(
    job: Job, record: StatusRecord, start: datetime, latest: datetime, now: datetime
) -> bool:
    """Without the counters (a store whose increments cost a read): the only window since
    the checkpoint is the one the status's latest run belongs to, and that run succeeded or
    holds a live lease. Otherwise the watcher reads."""
    windows = _due_windows(job, start, latest, 2)
    if len(windows) != 1:
        return not windows
    key = f"{job.name}:{format_window(windows[0])}"
    if record.data.get("run_key") != key:
        return False
    if record.status == RunState.SUCCEEDED.value:
        return True
    return record.status == RunState.RUNNING.value and (record.lease_expires or now) > now


def _checkpoint(
    states: Iterable[WindowState],
    runs: Mapping[str, RunRecord],
    record: StatusRecord,
    through: datetime | None,
) -> tuple[datetime, int] | None:
    """The newest window up to which every window is settled, and the matching base
    (``windows_recorded`` minus the records of later windows); None if it did not move."""
    newest: datetime | None = None
    for state in states:
        if not state.state.settled:
            break
        newest = state.window
    if newest is None or (through is not None and newest <= through):
        return None
    cut = format_window(newest)
    later = sum(1 for w in runs if w > cut)
    return newest, (record.windows_recorded or 0) - later


__all__ = [
    "Accounting",
    "Moment",
    "WindowState",
    "WindowStatus",
    "account",
    "grace_of",
    "window_state",
    "window_states",
]
