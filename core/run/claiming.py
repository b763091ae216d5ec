"""Claiming a run key: the fast path, judging a conflict, and taking a run over.

:meth:`Claimer.claim` either returns a :class:`Claim` (this worker now holds the run record and
the job's lock through a :class:`~cronwarden.run.lease.Lease`) or a :class:`Refusal` that says why
not (duplicate, in progress, overlap policy, payload mismatch, contention).

* **Fast path**: nothing exists yet (the common case): one commit creates the run record and
  the lock and merges the status. One round trip.
* **Judging a conflict**: the fast path was refused, so the run record and the lock are read
  (the run record not, when the store returned it with the refusal: DynamoDB) and judged
  (:meth:`Claimer.judge`): a finished run is a duplicate; a live lease on this run key is in
  progress; a live lock of another run key is an overlap, settled by the job's policy; a
  different payload is rejected.
* **Takeover**: a run whose lease ran out (or that failed) is updated against the version read:
  new owner, fence + 1, attempt + 1. A concurrent claimer loses the compare-and-set, reads
  again and judges again, at most ``CLAIM_ROUNDS`` times.
* **A claim of unknown outcome** (:class:`~cronwarden.model.errors.CommitOutcomeUnknown`: the
  reply was lost) is read back in the next round: a run record and lock that name this claim's
  owner token (unique to one ``claim`` call) mean a commit of it landed, and it is adopted (the
  run goes ahead as the same attempt); else the records are judged as usual. Without this, a
  landed claim would hold the window "in progress" until its lease ran out, a lease TTL late.
  When every round's outcome stays unknown, the last error is raised (the delivery is retried).
* **Handed over** (:meth:`Claimer.handover`): the fast path's records for the next window of a
  job whose lock the caller holds, made in the caller's completion commit (:mod:`.handover`).
"""

from __future__ import annotations

import enum
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ..jobs.definitions import Job, Overlap
from ..model.errors import CommitConflict, CommitOutcomeUnknown
from ..model.logs import RunLogger
from ..model.ports import Create, Key, Merge, Op, Record, Store, Update
from ..model.records import (
    CONSECUTIVE_FAILURES,
    DUPLICATES,
    SKIPS_SINCE_SUCCESS,
    WINDOWS_OPEN,
    WINDOWS_RECORDED,
    LockRecord,
    RunRecord,
    dead_letter_reason_of,
    lock_key_of,
    run_key_of,
    status_excused,
    status_key_of,
    status_overlap_failed,
    status_skipped,
    status_started,
)
from ..model.runs import RunRequest, RunState, fingerprint, format_window
from .handover import Handover
from .lease import Lease

CLAIM_ROUNDS = 6
_CATCHING_UP = {"catch_up", "backfill"}
#: requests that wait for the window before them in an oldest-first batch (``after``): catch-up
#: and backfill windows, and the current window a tick with catch-up windows enqueued last
_ORDERED = {*_CATCHING_UP, "schedule"}
#: requests a person made (a pause lets them through); a redrive counts as one too
_BY_HAND = {"manual", "rerun", "backfill"}
#: fires the scheduler made (a pause excuses their windows; so it does an upstream's wake-up)
_SCHEDULED = {"schedule", "catch_up"}
#: the ``excused`` reason of a window an operator resolved (``cronwarden dlq resolve``): a
#: redriven delivery of it is acknowledged without running (only a run by hand reopens it)
RESOLVED = "resolved"
#: how long a retry of a window started before a pause waits before it looks again
_PAUSED_RETRY_EVERY = 900.0
#: the owner of a lock that fences a job moved to another provider (``cronwarden migrate``):
#: the claim's fast path fails on it, and the contended path, which reads it, refuses
MOVED_OWNER = "moved"
MOVED_TO = "moved_to"  #: that lock's field naming the destination
MOVING_IN = "moving_in"  #: that lock's field on the destination while the state is copied in
#: status fields a migration writes: ``moved`` on the source (``{"to", "id", "at", "done"}``),
#: ``moving_in`` on the destination while it is filled in (``{"from", "id", "at"}``) and
#: ``migrated_from`` once it is open; the watcher stays quiet about a job moved or moving in
STATUS_MOVED = "moved"
STATUS_MOVING_IN = "moving_in"
STATUS_MIGRATED_FROM = "migrated_from"
#: how long a fire on a destination still being filled waits before it looks again
_MOVING_IN_RETRY_EVERY = 5.0


class Refused(enum.StrEnum):
    """Why a claim was refused (the values are those of the engine's outcome kinds)."""

    DUPLICATE = "duplicate"
    IN_PROGRESS = "in_progress"
    SKIPPED = "skipped"
    DEFERRED = "deferred"
    OVERLAP_FAILED = "overlap_failed"
    REJECTED = "rejected"
    #: a delivery of a window whose run is already dead-lettered in the store: its dead
    #: letter may never have reached the broker (a crash between the commit and the broker
    #: call), so this delivery is dead-lettered again rather than acknowledged
    DEAD_LETTERED = "dead_lettered"


@dataclass(frozen=True)
class Refusal:
    kind: Refused
    delay: float = 0.0
    reason: str = ""
    detail: str = ""
    #: a run found dead-lettered already: the reason it was first dead-lettered with
    dead_letter_reason: str = ""


@dataclass
class Claim:
    """A run this worker now owns: its lease, and the run record as claimed."""

    lease: Lease
    run: RunRecord

    @property
    def resumed(self) -> bool:
        """An earlier attempt of this run key ran (its checkpoint and ledger carry over)."""
        return self.run.fence > 1


def until(when: datetime | None, now: datetime) -> float:
    """Seconds from ``now`` until just after ``when`` (at least one)."""
    if when is None:
        return 1.0
    return max(1.0, (when - now).total_seconds() + 1.0)


class Claimer:
    """Claims run keys in ``store`` for ``worker_id``; see the module doc."""

    def __init__(
        self,
        store: Store,
        *,
        worker_id: str,
        clock: Callable[[], datetime],
        retention: timedelta,
        error_snippet_chars: int,
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.clock = clock
        self.retention = retention
        self.error_snippet_chars = error_snippet_chars

    def claim(
        self,
        job: Job,
        request: RunRequest,
        run_id: str,
        redrive: int,
        ttl: timedelta,
        log: RunLogger,
        *,
        after: datetime | None = None,
    ) -> Claim | Refusal:
        window_text = request.slot_text
        if after is not None and request.reason in _ORDERED:
            waiting = self._predecessor_pending(job, request, after, log)
            if waiting is not None:
                return waiting
        run_k, lock_k, status_k = (
            run_key_of(job.name, window_text),
            lock_key_of(job.name, request.slot or ""),  # an event consumer: one lock per key
            status_key_of(job.name),
        )
        owner = f"{self.worker_id}:{secrets.token_hex(4)}"
        payload_fp = fingerprint(request.payload)

        unknown: CommitOutcomeUnknown | None = None
        #: the run record the last refused commit found, when the store returned it with the
        #: refusal (no read needed); used once, by the next round
        found_run: Record | None = None
        for round_no in range(CLAIM_ROUNDS):
            now = self.clock()
            lock = LockRecord(
                owner=owner,
                run_id=run_id,
                run_key=request.run_key,
                window=window_text,
                reason=request.reason,
                lease_expires=now + ttl,
            )
            ops: list[Op]
            opened: dict[str, int] = {}  # window accounting: a new record opens its window
            if round_no == 0:
                # Fast path: nothing exists yet (the common case). One round trip.
                run = self._fresh(job, request, run_id, owner, payload_fp, now, ttl)
                ops = [Create(run_k, run.to_data()), Create(lock_k, lock.to_data())]
                opened = self._opened(recorded=1)
            else:
                existing_run = found_run if found_run is not None else self.store.get(run_k)
                found_run = None
                # our owner token on it: a commit of ours whose reply was lost landed
                adopted = self._landed(existing_run, lock_k, owner, ttl)
                if adopted is not None:
                    return self.started(job, request, adopted, log)
                # a finished window's duplicate is judged by its run record alone
                settled = _settled_by_run(existing_run, request, redrive)
                existing_lock = None if settled else self.store.get(lock_k)
                now = self.clock()
                refusal = self.judge(
                    job, request, existing_run, existing_lock, payload_fp, redrive, now, log
                )
                if refusal is not None:
                    return refusal
                if settled:  # judge refuses every settled case; read the lock all the same
                    existing_lock = self.store.get(lock_k)
                if existing_lock is not None:  # a pause on the lock stays on it
                    carried = LockRecord.from_data(existing_lock.data)
                    if carried.paused(now):
                        lock = replace(lock, pause=carried.pause)
                if existing_run is None:
                    run = self._fresh(job, request, run_id, owner, payload_fp, now, ttl)
                    ops = [Create(run_k, run.to_data())]
                    opened = self._opened(recorded=1)
                else:
                    old = RunRecord.from_data(existing_run.data)
                    run = self._takeover(old, run_id, owner, redrive, now, ttl)
                    ops = [Update(run_k, run.to_data(), existing_run.version)]
                    if old.state.settled:  # an excused window run by hand opens again
                        opened = self._opened(recorded=0)
                ops.append(
                    Create(lock_k, lock.to_data())
                    if existing_lock is None
                    else Update(lock_k, lock.to_data(), existing_lock.version)
                )
            ops.append(
                Merge(status_k, status_started(job.name, run, now, _due(job, run, now)), opened)
            )
            try:
                versions = self.store.commit(ops)
            except CommitConflict as conflict:
                if conflict.index == 0 and conflict.reason == "exists":
                    found_run = _found(conflict, run_k)
                continue
            except CommitOutcomeUnknown as exc:
                unknown = exc  # the next round reads it back
                continue
            lease = Lease(
                self.store, self.clock, ttl, run_k, run, versions[0], lock_k, lock, versions[1]
            )
            return self.started(job, request, Claim(lease, run), log)
        if unknown is not None:
            raise unknown
        log.event(
            logging.WARNING,
            "run.deferred",
            f"{job.name}: claim contended {CLAIM_ROUNDS} times; trying again later",
            reason="contention",
        )
        return Refusal(Refused.DEFERRED, delay=_backoff(job, 1), reason="contention")

    def handover(self, job: Job, request: RunRequest, run_id: str, ttl: timedelta) -> Handover:
        """The claim of ``request`` (a plain window of ``job``, whose lock the caller holds and
        is about to release) as the records its fast path would create, to ride in the
        caller's completion (:mod:`.handover`)."""
        now = self.clock()
        owner = f"{self.worker_id}:{secrets.token_hex(4)}"
        run = self._fresh(job, request, run_id, owner, fingerprint(request.payload), now, ttl)
        lock = LockRecord(
            owner=owner,
            run_id=run_id,
            run_key=request.run_key,
            window=request.slot_text,
            reason=request.reason,
            lease_expires=now + ttl,
        )
        status = Merge(
            status_key_of(job.name),
            status_started(job.name, run, now, _due(job, run, now)),
            self._opened(recorded=1),
        )
        return Handover(request, run_key_of(job.name, request.slot_text), run, lock, status)

    def _landed(
        self, stored_run: Record | None, lock_k: Key, owner: str, ttl: timedelta
    ) -> Claim | None:
        """The claim, when the run record and the lock both name ``owner`` (a token unique to
        this claim call: a commit of it whose reply was lost landed); else None. One read more
        (the lock) only then."""
        if stored_run is None or stored_run.data.get("owner") != owner:
            return None
        stored_lock = self.store.get(lock_k)
        if stored_lock is None or stored_lock.data.get("owner") != owner:
            return None
        run = RunRecord.from_data(stored_run.data)
        lease = Lease(
            self.store,
            self.clock,
            ttl,
            stored_run.key,
            run,
            stored_run.version,
            lock_k,
            LockRecord.from_data(stored_lock.data),
            stored_lock.version,
        )
        return Claim(lease, run)

    def started(self, job: Job, request: RunRequest, claim: Claim, log: RunLogger) -> Claim:
        """``claim``, logged as started."""
        run = claim.run
        log.extra["attempt"] = run.attempt  # type: ignore[index]
        log.extra["fence"] = run.fence  # type: ignore[index]
        log.event(
            logging.INFO,
            "run.started",
            f"{job.name}: started window {request.slot_text} (attempt {run.attempt}"
            f"{', resuming from checkpoint' if run.fence > 1 else ''})",
            resumed=run.fence > 1,
            reason=request.reason,
        )
        return claim

    def _predecessor_pending(
        self, job: Job, request: RunRequest, after: datetime, log: RunLogger
    ) -> Refusal | None:
        """Catch-up and backfill (and the current window of a tick that enqueued catch-up
        windows) run oldest-first per job with any number of workers: a window waits
        (DEFERRED, no delivery attempt used) while the window before it in its batch can still
        run: no run record yet (its request is queued), failed (a retry is due) or running.
        One read, on the catch-up path only."""
        if after >= request.window:
            return None
        record = self.store.get(run_key_of(job.name, format_window(after)))
        state = None if record is None else RunRecord.from_data(record.data).state
        if state is not None and state not in (RunState.FAILED, RunState.RUNNING):
            return None
        detail = f"waits for the older window {format_window(after)} ({state or 'queued'})"
        log.event(
            logging.INFO,
            "run.deferred",
            f"{job.name}: {request.run_key} {detail}",
            reason="older_window_first",
        )
        return Refusal(
            Refused.DEFERRED,
            delay=max(1.0, _backoff(job, 1)),
            reason="older_window_first",
            detail=detail,
        )

    def _opened(self, *, recorded: int) -> dict[str, int]:
        """The accounting increments of a claim that opens a window (none on a store whose
        increments cost a read: its watcher reads the run records instead)."""
        if not self.store.capabilities.atomic_increment:
            return {}
        return {WINDOWS_RECORDED: recorded, WINDOWS_OPEN: 1} if recorded else {WINDOWS_OPEN: 1}

    # -- judging a conflict -----------------------------------------------------------------
    def judge(
        self,
        job: Job,
        request: RunRequest,
        run_record: Record | None,
        lock_record: Record | None,
        payload_fp: str,
        redrive: int,
        now: datetime,
        log: RunLogger,
    ) -> Refusal | None:
        """None when this worker may take the run; else the refusal."""
        key = request.run_key
        if lock_record is not None and lock_record.data.get("owner") == MOVED_OWNER:
            return self._moved(job, request, lock_record.data, run_record is None, now, log)
        lock = None if lock_record is None else LockRecord.from_data(lock_record.data)
        if run_record is not None:
            run = RunRecord.from_data(run_record.data)
            if (run.payload_fp or payload_fp) != payload_fp:
                detail = (
                    f"{key} was first run with a different payload; "
                    "use another window or job for different input"
                )
                log.event(logging.ERROR, "run.rejected", detail, reason="PayloadMismatch")
                return Refusal(Refused.REJECTED, reason="PayloadMismatch", detail=detail)
            if run.state is RunState.DEAD_LETTERED and redrive <= run.redrive:
                detail = (
                    f"{key} is dead-lettered in the store (attempt {run.attempt}); this "
                    "delivery goes to the dead-letter queue too (redrive it, or "
                    "`cronwarden dlq resolve`)"
                )
                log.event(
                    logging.WARNING,
                    "run.dead_lettered",
                    f"{job.name}: {detail}",
                    reason="AlreadyDeadLettered",
                    state=run.state.value,
                )
                return Refusal(
                    Refused.DEAD_LETTERED,
                    reason="AlreadyDeadLettered",
                    detail=detail,
                    dead_letter_reason=dead_letter_reason_of(run, job.retry.max_attempts),
                )
            if _redrive_of_resolved(run, redrive):
                # a redrive is for a dead letter; the operator settled this window since
                detail = (
                    f"{key} was resolved by an operator ({run.excused_detail or 'no detail'}); "
                    "a redriven delivery does not run it (`cronwarden trigger --rerun` does)"
                )
                log.event(
                    logging.INFO,
                    "run.skipped",
                    f"{job.name}: {detail}",
                    reason=RESOLVED,
                    state=run.state.value,
                    redrive=redrive,
                )
                self._record_skip(job, RESOLVED, "", now, overlap=False)
                return Refusal(Refused.DUPLICATE, reason=RESOLVED, detail=detail)
            excused_fire = run.state is RunState.EXCUSED and _refire(request.reason) and not redrive
            rerun = redrive > run.redrive  # a re-run / redrive is a newer generation
            if (run.state is RunState.SUCCEEDED and not rerun) or excused_fire:
                log.event(
                    logging.INFO,
                    "run.skipped",
                    f"{job.name}: {key} already {run.state.value}; duplicate delivery",
                    reason="duplicate",
                    state=run.state.value,
                )
                self._record_skip(job, "duplicate", "", now, overlap=False)
                return Refusal(Refused.DUPLICATE, reason="duplicate")
            if run.lease_live(now) and (lock is None or lock.run_key == key):
                holder = run.holder
                log.event(
                    logging.INFO,
                    "run.skipped",
                    f"{job.name}: {key} is being run by {holder}; duplicate delivery",
                    reason="in_progress",
                    lock_owner=holder,
                )
                self._record_skip(job, "in_progress", holder, now, overlap=False)
                return Refusal(
                    Refused.IN_PROGRESS,
                    delay=until(run.lease_expires, now),
                    reason="in_progress",
                    detail=holder,
                )
        if lock is not None and lock.paused(now):
            by_hand = request.reason in _BY_HAND or redrive > 0
            if not by_hand:
                return self._paused(job, request, lock, fresh=run_record is None, now=now, log=log)
            if lock.held_by_pause:
                return None  # a run by hand goes through the pause, and carries it on
        if lock is not None and lock.live(now):
            if lock.run_key == key:
                log.event(
                    logging.INFO,
                    "run.skipped",
                    f"{job.name}: {key} is being run by {lock.holder}",
                    reason="in_progress",
                    lock_owner=lock.holder,
                )
                self._record_skip(job, "in_progress", lock.holder, now, overlap=False)
                return Refusal(
                    Refused.IN_PROGRESS,
                    delay=until(lock.lease_expires, now),
                    reason="in_progress",
                    detail=lock.holder,
                )
            fresh_fire = request.reason == "schedule" and run_record is None and not redrive
            return self._overlap(job, request, lock, now, log, fresh_fire=fresh_fire)
        return None

    def _paused(
        self,
        job: Job,
        request: RunRequest,
        lock: LockRecord,
        *,
        fresh: bool,
        now: datetime,
        log: RunLogger,
    ) -> Refusal:
        """The job is paused (``cronwarden pause``). A new scheduled or catch-up fire is
        recorded against its window as excused (reason ``paused``) and acknowledged; a retry of
        a window that had started before the pause waits for the resume (DEFERRED)."""
        pause = lock.pause or {}
        detail = f"paused by {pause.get('by') or '?'}: {pause.get('reason') or ''}".rstrip(": ")
        if fresh and _fired(request.reason):
            if not excuse_window(
                self.store,
                job,
                request,
                now,
                retention=self.retention,
                reason="paused",
                detail=detail,
            ):
                return Refusal(Refused.DEFERRED, delay=_backoff(job, 1), reason="contention")
            log.event(
                logging.INFO,
                "run.skipped",
                f"{job.name}: {request.run_key} excused: {detail}",
                reason="paused",
            )
            return Refusal(Refused.SKIPPED, reason="paused", detail=detail)
        delay = min(_PAUSED_RETRY_EVERY, until(lock.pause_until(), now))
        log.event(
            logging.INFO,
            "run.deferred",
            f"{job.name}: {request.run_key} waits for the resume ({detail})",
            reason="paused",
            delay_s=delay,
        )
        return Refusal(Refused.DEFERRED, delay=delay, reason="paused", detail=detail)

    def _moved(
        self,
        job: Job,
        request: RunRequest,
        fence: Mapping[str, Any],
        fresh: bool,
        now: datetime,
        log: RunLogger,
    ) -> Refusal:
        """The job moved to another provider (``cronwarden migrate``). On the source every claim
        is refused with reason ``moved`` and acknowledged (a new window is recorded as excused,
        naming the destination, without touching the status counters: the destination runs it);
        on a destination still being filled in (``moving_in``) the claim waits (DEFERRED)."""
        if fence.get(MOVING_IN):
            detail = f"moving in from {fence.get(MOVING_IN)}; waits for the state"
            log.event(
                logging.INFO,
                "run.deferred",
                f"{job.name}: {request.run_key} {detail}",
                reason="moving_in",
            )
            return Refusal(
                Refused.DEFERRED, delay=_MOVING_IN_RETRY_EVERY, reason="moving_in", detail=detail
            )
        detail = f"moved to {fence.get(MOVED_TO) or '?'}"
        if fresh:
            excuse_window(
                self.store,
                job,
                request,
                now,
                retention=self.retention,
                reason="moved",
                detail=detail,
                record_only=True,
            )
        log.event(
            logging.WARNING,
            "run.skipped",
            f"{job.name}: {request.run_key} {detail}",
            reason="moved",
        )
        return Refusal(Refused.SKIPPED, reason="moved", detail=detail)

    def _overlap(
        self,
        job: Job,
        request: RunRequest,
        lock: LockRecord,
        now: datetime,
        log: RunLogger,
        *,
        fresh_fire: bool,
    ) -> Refusal:
        """Another window holds the lock. The job's overlap policy applies to a new scheduled
        fire only (``fresh_fire``: reason ``schedule``, no run record of the window yet, not a
        redrive); a retry, redelivery, redrive, manual run, catch-up or backfill of an
        unfinished window waits for the lock (DEFERRED: postponed without using up a delivery
        attempt) and never skips or fails on it: skipping it would leave its window
        unaccounted for."""
        key, holder = request.run_key, lock.holder
        policy = job.overlap
        if not fresh_fire or {request.reason, lock.reason} & _CATCHING_UP:
            # Catch-up and backfill runs queue behind each other and behind the current window;
            # skipping would drop the very windows they exist to fill.
            policy = Overlap.DEFER
        if policy is Overlap.SKIP:
            if not self._excuse(job, request, holder, now):
                # the window's record appeared meanwhile: judge the next delivery afresh
                return Refusal(Refused.DEFERRED, delay=_backoff(job, 1), reason="contention")
            log.event(
                logging.WARNING,
                "run.skipped",
                f"{job.name}: skipped {key}: lock held by {holder}",
                reason="lock_held",
                lock_owner=holder,
            )
            return Refusal(Refused.SKIPPED, reason="lock_held", detail=holder)
        if policy is Overlap.DEFER:
            delay = _backoff(job, 1)
            log.event(
                logging.INFO,
                "run.deferred",
                f"{job.name}: deferred {key} by {delay:.0f}s: lock held by {holder}",
                reason="lock_held",
                lock_owner=holder,
                delay_s=delay,
            )
            self._record_skip(job, "deferred", holder, now, overlap=False)
            return Refusal(Refused.DEFERRED, delay=delay, reason="lock_held", detail=holder)
        detail = f"{job.name}: overlap refused for {key}: lock held by {holder}"
        log.event(logging.ERROR, "run.overlap", detail, reason="lock_held", lock_owner=holder)
        error = detail[: self.error_snippet_chars]
        self.store.commit(
            [
                Merge(
                    status_key_of(job.name),
                    status_overlap_failed(error, now),
                    {CONSECUTIVE_FAILURES: 1},
                )
            ]
        )
        return Refusal(Refused.OVERLAP_FAILED, reason="lock_held", detail=detail)

    def _excuse(self, job: Job, request: RunRequest, holder: str, now: datetime) -> bool:
        """Record a scheduled fire skipped by the overlap policy against its window (state
        ``excused``, reason ``overlap_skip``) with the skip count, in one commit. False when
        the window's run record exists by now (nothing written)."""
        return excuse_window(
            self.store,
            job,
            request,
            now,
            retention=self.retention,
            reason="overlap_skip",
            detail=f"lock held by {holder}",
            status_fields=status_skipped("lock_held", holder, now),
            increments={SKIPS_SINCE_SUCCESS: 1},
        )

    def _record_skip(
        self, job: Job, reason: str, holder: str, now: datetime, *, overlap: bool
    ) -> None:
        counter = SKIPS_SINCE_SUCCESS if overlap else DUPLICATES
        self.store.commit(
            [Merge(status_key_of(job.name), status_skipped(reason, holder, now), {counter: 1})]
        )

    # -- the run record as claimed ----------------------------------------------------------
    def _fresh(
        self,
        job: Job,
        request: RunRequest,
        run_id: str,
        owner: str,
        payload_fp: str,
        now: datetime,
        ttl: timedelta,
    ) -> RunRecord:
        return RunRecord(
            job=job.name,
            window=request.slot_text,
            run_key=request.run_key,
            state=RunState.RUNNING,
            owner=owner,
            run_id=run_id,
            fence=1,
            attempt=1,
            budget_start=0,
            redrive=0,
            lease_expires=now + ttl,
            started_at=now,
            first_started_at=now,
            finished_at=None,
            checkpoint=None,
            payload=request.payload,
            payload_fp=payload_fp,
            reason=request.reason,
            error=None,
            counters={},
            expire_at=now + self.retention,
        )

    def _takeover(
        self,
        old: RunRecord,
        run_id: str,
        owner: str,
        redrive: int,
        now: datetime,
        ttl: timedelta,
    ) -> RunRecord:
        run = old.with_(
            state=RunState.RUNNING,
            owner=owner,
            run_id=run_id,
            fence=old.fence + 1,
            attempt=old.attempt + 1,
            lease_expires=now + ttl,
            started_at=now,
            finished_at=None,
            previous_run_id=old.run_id or None,
            expire_at=now + self.retention,
        )
        if redrive > old.redrive:  # a redriven dead letter gets a fresh attempt budget
            run = run.with_(redrive=redrive, budget_start=old.attempt)
        return run


def _fired(reason: str) -> bool:
    """A fire the schedule or an upstream's completion made (not a person): a pause excuses it."""
    return reason in _SCHEDULED or reason.split(":", 1)[0] == "after"


def _refire(reason: str) -> bool:
    """Another copy of the fire that made an excused window (a catch-up may still run it)."""
    return reason != "catch_up" and _fired(reason)


def _settled_by_run(record: Record | None, request: RunRequest, redrive: int) -> bool:
    """Whether the run record alone decides the claim (the lock need not be read): the window
    succeeded, was excused for a scheduled fire, or is dead-lettered, and this delivery is not
    a newer generation (a re-run or redrive); or it was resolved by an operator and this is a
    redrive. :meth:`Claimer.judge` refuses those without looking at the lock (duplicate, dead
    letter, or a payload mismatch)."""
    if record is None:
        return False
    run = RunRecord.from_data(record.data)
    if run.state is RunState.EXCUSED:
        if redrive:
            return _redrive_of_resolved(run, redrive)
        return _refire(request.reason)
    if redrive > run.redrive:
        return False
    return run.state in (RunState.SUCCEEDED, RunState.DEAD_LETTERED)


def _redrive_of_resolved(run: RunRecord, redrive: int) -> bool:
    """A redriven delivery (``redrive`` > 0: a dead letter moved back, queue-wide or by window)
    of a window an operator resolved: refused, whatever its generation. A re-run by hand of an
    excused window carries no generation (``trigger`` gives one only to a succeeded or
    dead-lettered window), so it still runs; so does a redrive of a window excused for a pause
    or an overlap skip (a redrive counts as a run by hand there)."""
    return bool(redrive) and run.state is RunState.EXCUSED and run.excused == RESOLVED


def _found(conflict: CommitConflict, key: Key) -> Record | None:
    """The record ``conflict`` says its refused create of ``key`` found, or None (then read)."""
    found = conflict.found
    return found if isinstance(found, Record) and found.key == key else None


def _backoff(job: Job, attempt: int) -> float:
    return job.retry.backoff(attempt).total_seconds()


def _due(job: Job, run: RunRecord, now: datetime) -> datetime:
    """When a run just claimed becomes a problem if it never finishes (the ``due_at`` its
    claim writes): past its max runtime (``stuck``), its lease run out past the grace (a
    gap); at once for a job with a ``slow_factor`` (the watcher knows its baseline)."""
    if job.slow_factor is not None:
        return now
    due = now + job.max_runtime
    if run.lease_expires is not None:
        due = min(due, run.lease_expires + job.grace_at(run.lease_expires))
    return due


def excuse_window(
    store: Store,
    job: Job,
    request: RunRequest,
    now: datetime,
    *,
    retention: timedelta,
    reason: str,
    detail: str,
    status_fields: Mapping[str, Any] | None = None,
    increments: Mapping[str, int] | None = None,
    record_only: bool = False,
) -> bool:
    """Account for ``request``'s window without running it (state ``excused`` with ``reason``:
    ``overlap_skip``, ``paused``), in one commit with the job's status. False when the window's
    run record exists by now (nothing written: the window is accounted for already).
    ``record_only``: the run record alone, the status untouched (a window another provider
    accounts for: ``moved``)."""
    window_text = format_window(request.window)
    run = RunRecord(
        job=job.name,
        window=window_text,
        run_key=request.run_key,
        state=RunState.EXCUSED,
        finished_at=now,
        expire_at=now + retention,
        payload=request.payload,
        payload_fp=fingerprint(request.payload),
        reason=request.reason,
        excused=reason,
        excused_detail=detail,
    )
    bumps = dict(increments or {})
    if store.capabilities.atomic_increment:
        bumps[WINDOWS_RECORDED] = 1
    fields = {**(status_fields or {}), **status_excused(run, now)}
    ops: list[Op] = [Create(run_key_of(job.name, window_text), run.to_data())]
    if not record_only:
        ops.append(Merge(status_key_of(job.name), fields, bumps))
    try:
        store.commit(ops)
    except CommitConflict:
        return False
    return True
