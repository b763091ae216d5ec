"""The run protocol (DESIGN §3): claim, lease, run the handler, record the outcome.

``Engine.execute(request)`` is what every worker (local, Pub/Sub push, Service Bus trigger)
calls for one delivery. It returns an :class:`Outcome` that says how to settle the delivery;
the engine itself never touches a queue.

Round trips on the happy path: one commit to claim (create run record + create lock + status
"running"), one commit to complete (run succeeded + delete lock + status), plus one per lease
renewal and one per ledger batch. Only the contended and failure paths read.
"""

from __future__ import annotations

import enum
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .context import Ledger, RunContext, Uncertain
from .errors import (
    Cancelled,
    CommitConflict,
    LeaseLost,
    MalformedRunRequest,
    PermanentError,
    RunInterrupted,
    UnknownJob,
)
from .jobs import Job, JobSet, Overlap
from .lease import Clock, Lease, LeaseKeeper
from .logs import RunLogger, get_logger
from .model import RunRequest, RunState, fingerprint, format_window, new_run_id
from .ports import ITEM, Create, Delete, Merge, Op, Store, Update
from .records import (
    LockView,
    RunView,
    expire_at,
    iso,
    lock_key_of,
    parse_iso,
    run_key_of,
    status_key_of,
)
from .redaction import snippet

_CLAIM_ROUNDS = 6
_CATCHING_UP = {"catch_up", "backfill"}


def _until(when: datetime | None, now: datetime) -> float:
    """Seconds from ``now`` until just after ``when`` (at least one)."""
    if when is None:
        return 1.0
    return max(1.0, (when - now).total_seconds() + 1.0)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Settle(enum.StrEnum):
    ACK = "ack"
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"


class OutcomeKind(enum.StrEnum):
    SUCCEEDED = "succeeded"
    DUPLICATE = "duplicate"  #: the run key already finished (succeeded / dead-lettered)
    IN_PROGRESS = "in_progress"  #: another live owner runs this very run key: look again later
    SKIPPED = "skipped"  #: overlap policy skip: another run of the job holds the lock
    DEFERRED = "deferred"  #: overlap policy defer: try again later
    OVERLAP_FAILED = "overlap_failed"  #: overlap policy fail
    FAILED = "failed"  #: handler failed, attempts left: retry after ``delay``
    DEAD_LETTERED = "dead_lettered"  #: attempts exhausted or permanent error
    LEASE_LOST = "lease_lost"  #: another owner took the run over; this one wrote nothing more
    REJECTED = "rejected"  #: the request itself is wrong (payload mismatch): dead-letter it

    @property
    def settle(self) -> Settle:
        # IN_PROGRESS retries rather than acks: if this delivery is the owner's own message come
        # back (its visibility ran out), acking it would drop the only carrier of the run.
        if self in (
            OutcomeKind.DEFERRED,
            OutcomeKind.FAILED,
            OutcomeKind.LEASE_LOST,
            OutcomeKind.IN_PROGRESS,
        ):
            return Settle.RETRY
        if self in (OutcomeKind.DEAD_LETTERED, OutcomeKind.REJECTED):
            return Settle.DEAD_LETTER
        return Settle.ACK


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    run_key: str
    run_id: str | None = None
    delay: float = 0.0  #: seconds before the retry, when ``kind.settle`` is RETRY
    reason: str = ""  #: machine-readable reason (dead-letter reason, skip reason)
    detail: str = ""  #: redacted human text
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def settle(self) -> Settle:
        return self.kind.settle


@dataclass
class EngineSettings:
    """Tunables shared by every provider.

    ``lease_margin`` is added to a job's max runtime to give the lease TTL; it must exceed the
    worst clock skew between workers (leases are judged by the reader's clock).
    """

    lease_margin: timedelta = timedelta(seconds=60)
    renew_fraction: float = 1 / 3
    batch_size: int = 100
    uncertain: Uncertain = Uncertain.REDO
    retention: timedelta = timedelta(days=30)
    clock: Clock = utcnow
    error_snippet_chars: int = 500


@dataclass
class _Claim:
    lease: Lease
    view: RunView
    resumed: bool


class Engine:
    """Runs requests of ``jobs`` against ``store``; one instance per worker process is enough."""

    def __init__(
        self,
        jobs: JobSet,
        store: Store,
        settings: EngineSettings | None = None,
        *,
        worker_id: str | None = None,
    ) -> None:
        self.jobs = jobs
        self.store = store
        self.settings = settings or EngineSettings()
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self._log = get_logger("engine")
        self._shutdown = threading.Event()
        self._active: set[Lease] = set()
        self._active_guard = threading.Lock()

    # -- public -----------------------------------------------------------------------------
    def now(self) -> datetime:
        return self.settings.clock()

    def lease_ttl(self, job: Job) -> timedelta:
        return job.max_runtime + self.settings.lease_margin

    def shutdown(self) -> None:
        """Ask running handlers to stop cooperatively (``ctx`` raises ``Cancelled``)."""
        self._shutdown.set()
        with self._active_guard:
            for lease in self._active:
                lease.interrupt(Cancelled("worker is shutting down"))

    def execute(
        self,
        request: RunRequest,
        *,
        redrive: int = 0,
        on_renew: Callable[[], None] | None = None,
    ) -> Outcome:
        """Run ``request`` once under the protocol; never raises for handler errors.

        Raises :class:`~cronwarden.errors.UnknownJob` for a job this engine does not know and
        lets store outages propagate (the delivery should then be retried by the caller).
        """
        job = self.jobs.get(request.job)
        if job is None:
            raise UnknownJob(f"unknown job {request.job!r}")
        if job.schedule.floor(request.window) != request.window:
            raise MalformedRunRequest(
                f"window {format_window(request.window)} is not a window of {job.name} "
                f"({job.schedule.cron})"
            )
        run_id = new_run_id(self.now())
        log = RunLogger(
            get_logger("run"),
            {
                "job": job.name,
                "run_key": request.run_key,
                "run_id": run_id,
                "window": format_window(request.window),
                "worker": self.worker_id,
            },
        )
        claimed = self._claim(job, request, run_id, redrive, log)
        if isinstance(claimed, Outcome):
            return claimed
        return self._run(job, request, claimed, log, on_renew)

    # -- claim ------------------------------------------------------------------------------
    def _claim(
        self, job: Job, request: RunRequest, run_id: str, redrive: int, log: RunLogger
    ) -> _Claim | Outcome:
        window_text = format_window(request.window)
        run_k, lock_k, status_k = (
            run_key_of(job.name, window_text),
            lock_key_of(job.name),
            status_key_of(job.name),
        )
        owner = f"{self.worker_id}:{secrets.token_hex(4)}"
        payload_fp = fingerprint(request.payload)
        ttl = self.lease_ttl(job)

        for round_no in range(_CLAIM_ROUNDS):
            now = self.now()
            expires = iso(now + ttl)
            lock_data = {
                "owner": owner,
                "run_id": run_id,
                "run_key": request.run_key,
                "window": window_text,
                "reason": request.reason,
                "lease_expires": expires,
            }
            run_data: dict[str, Any]
            ops: list[Op]
            if round_no == 0:
                # Fast path: nothing exists yet (the common case). One round trip.
                run_data = self._fresh_run(job, request, run_id, owner, payload_fp, now, ttl)
                ops = [Create(run_k, run_data), Create(lock_k, lock_data)]
                existing_run = existing_lock = None
            else:
                existing_run = self.store.get(run_k)
                existing_lock = self.store.get(lock_k)
                now = self.now()
                verdict = self._judge(
                    job, request, existing_run, existing_lock, payload_fp, redrive, now, log
                )
                if verdict is not None:
                    return verdict
                if existing_run is None:
                    run_data = self._fresh_run(job, request, run_id, owner, payload_fp, now, ttl)
                    ops = [Create(run_k, run_data)]
                else:
                    run_data = self._takeover(existing_run.data, run_id, owner, redrive, now, ttl)
                    ops = [Update(run_k, run_data, existing_run.version)]
                ops.append(
                    Create(lock_k, lock_data)
                    if existing_lock is None
                    else Update(lock_k, lock_data, existing_lock.version)
                )
            ops.append(Merge(status_k, self._status_started(job, request, run_data, now)))
            try:
                versions = self.store.commit(ops)
            except CommitConflict:
                continue
            view = RunView(run_data)
            lease = Lease(
                self.store,
                self.settings.clock,
                ttl,
                run_k,
                run_data,
                versions[0],
                lock_k,
                lock_data,
                versions[1],
            )
            log.extra["attempt"] = view.attempt  # type: ignore[index]
            log.extra["fence"] = view.fence  # type: ignore[index]
            log.event(
                logging.INFO,
                "run.started",
                f"{job.name}: started window {window_text} (attempt {view.attempt}"
                f"{', resuming from checkpoint' if view.fence > 1 else ''})",
                resumed=view.fence > 1,
                reason=request.reason,
            )
            return _Claim(lease, view, resumed=view.fence > 1)
        log.event(
            logging.WARNING,
            "run.deferred",
            f"{job.name}: claim contended {_CLAIM_ROUNDS} times; trying again later",
            reason="contention",
        )
        return Outcome(
            OutcomeKind.DEFERRED, request.run_key, delay=self._backoff(job, 1), reason="contention"
        )

    def _judge(
        self,
        job: Job,
        request: RunRequest,
        run: Any,
        lock: Any,
        payload_fp: str,
        redrive: int,
        now: datetime,
        log: RunLogger,
    ) -> Outcome | None:
        """None when this worker may take the run; else the outcome that refuses it."""
        key = request.run_key
        if run is not None:
            view = RunView(run.data)
            if run.data.get("payload_fp", payload_fp) != payload_fp:
                detail = (
                    f"{key} was first run with a different payload; "
                    "use another window or job for different input"
                )
                log.event(logging.ERROR, "run.rejected", detail, reason="PayloadMismatch")
                return Outcome(OutcomeKind.REJECTED, key, reason="PayloadMismatch", detail=detail)
            if view.state is RunState.SUCCEEDED or (
                view.state is RunState.DEAD_LETTERED and redrive <= view.redrive
            ):
                log.event(
                    logging.INFO,
                    "run.skipped",
                    f"{job.name}: {key} already {view.state.value}; duplicate delivery",
                    reason="duplicate",
                    state=view.state.value,
                )
                self._record_skip(job, "duplicate", "", now, overlap=False)
                return Outcome(OutcomeKind.DUPLICATE, key, reason="duplicate")
            if view.lease_live(now) and (lock is None or lock.data.get("run_key") == key):
                holder = f"{view.owner} (run {run.data.get('run_id')})"
                log.event(
                    logging.INFO,
                    "run.skipped",
                    f"{job.name}: {key} is being run by {holder}; duplicate delivery",
                    reason="in_progress",
                    lock_owner=holder,
                )
                self._record_skip(job, "in_progress", holder, now, overlap=False)
                return Outcome(
                    OutcomeKind.IN_PROGRESS,
                    key,
                    delay=_until(view.lease_expires, now),
                    reason="in_progress",
                    detail=holder,
                )
        if lock is not None and LockView(lock.data).live(now):
            holder_view = LockView(lock.data)
            if lock.data.get("run_key") == key:
                log.event(
                    logging.INFO,
                    "run.skipped",
                    f"{job.name}: {key} is being run by {holder_view.holder}",
                    reason="in_progress",
                    lock_owner=holder_view.holder,
                )
                self._record_skip(job, "in_progress", holder_view.holder, now, overlap=False)
                return Outcome(
                    OutcomeKind.IN_PROGRESS,
                    key,
                    delay=_until(parse_iso(lock.data.get("lease_expires")), now),
                    reason="in_progress",
                    detail=holder_view.holder,
                )
            return self._overlap(job, request, holder_view.holder, now, log, lock.data)
        return None

    def _overlap(
        self,
        job: Job,
        request: RunRequest,
        holder: str,
        now: datetime,
        log: RunLogger,
        lock: dict[str, Any],
    ) -> Outcome:
        key = request.run_key
        policy = job.overlap
        if {request.reason, lock.get("reason")} & _CATCHING_UP:
            # Catch-up and backfill runs queue behind each other and behind the current window;
            # skipping would drop the very windows they exist to fill.
            policy = Overlap.DEFER
        if policy is Overlap.SKIP:
            log.event(
                logging.WARNING,
                "run.skipped",
                f"{job.name}: skipped {key}: lock held by {holder}",
                reason="lock_held",
                lock_owner=holder,
            )
            self._record_skip(job, "lock_held", holder, now, overlap=True)
            return Outcome(OutcomeKind.SKIPPED, key, reason="lock_held", detail=holder)
        if policy is Overlap.DEFER:
            delay = self._backoff(job, 1)
            log.event(
                logging.INFO,
                "run.deferred",
                f"{job.name}: deferred {key} by {delay:.0f}s: lock held by {holder}",
                reason="lock_held",
                lock_owner=holder,
                delay_s=delay,
            )
            self._record_skip(job, "deferred", holder, now, overlap=False)
            return Outcome(
                OutcomeKind.DEFERRED, key, delay=delay, reason="lock_held", detail=holder
            )
        detail = f"{job.name}: overlap refused for {key}: lock held by {holder}"
        log.event(logging.ERROR, "run.overlap", detail, reason="lock_held", lock_owner=holder)
        self.store.commit(
            [
                Merge(
                    status_key_of(job.name),
                    {
                        "last_error": detail[: self.settings.error_snippet_chars],
                        "last_skip_reason": "overlap_failed",
                        "last_skip_at": iso(now),
                    },
                    {"consecutive_failures": 1},
                )
            ]
        )
        return Outcome(OutcomeKind.OVERLAP_FAILED, key, reason="lock_held", detail=detail)

    def _record_skip(
        self, job: Job, reason: str, holder: str, now: datetime, *, overlap: bool
    ) -> None:
        counter = "skips_since_success" if overlap else "duplicates"
        self.store.commit(
            [
                Merge(
                    status_key_of(job.name),
                    {
                        "last_skip_reason": reason,
                        "last_skip_at": iso(now),
                        "last_skip_owner": holder,
                    },
                    {counter: 1},
                )
            ]
        )

    # -- record builders --------------------------------------------------------------------
    def _fresh_run(
        self,
        job: Job,
        request: RunRequest,
        run_id: str,
        owner: str,
        payload_fp: str,
        now: datetime,
        ttl: timedelta,
    ) -> dict[str, Any]:
        return {
            "job": job.name,
            "window": format_window(request.window),
            "run_key": request.run_key,
            "state": RunState.RUNNING.value,
            "owner": owner,
            "run_id": run_id,
            "fence": 1,
            "attempt": 1,
            "budget_start": 0,
            "redrive": 0,
            "lease_expires": iso(now + ttl),
            "started_at": iso(now),
            "first_started_at": iso(now),
            "finished_at": None,
            "checkpoint": None,
            "payload": request.payload,
            "payload_fp": payload_fp,
            "reason": request.reason,
            "error": None,
            "counters": {},
            "expire_at": expire_at(now, self.settings.retention),
        }

    def _takeover(
        self,
        old: dict[str, Any],
        run_id: str,
        owner: str,
        redrive: int,
        now: datetime,
        ttl: timedelta,
    ) -> dict[str, Any]:
        view = RunView(old)
        data = dict(old)
        data.update(
            state=RunState.RUNNING.value,
            owner=owner,
            run_id=run_id,
            fence=view.fence + 1,
            attempt=view.attempt + 1,
            lease_expires=iso(now + ttl),
            started_at=iso(now),
            finished_at=None,
            previous_run_id=old.get("run_id"),
            expire_at=expire_at(now, self.settings.retention),
        )
        if redrive > view.redrive:  # a redriven dead letter gets a fresh attempt budget
            data.update(redrive=redrive, budget_start=view.attempt)
        return data

    def _status_started(
        self, job: Job, request: RunRequest, run: dict[str, Any], now: datetime
    ) -> dict[str, Any]:
        return {
            "job_name": job.name,
            "run_id": run["run_id"],
            "run_key": request.run_key,
            "window": run["window"],
            "status": RunState.RUNNING.value,
            "started_at": iso(now),
            "finished_at": None,
            "duration_ms": None,
            "attempt": run["attempt"],
            "owner": run["owner"],
            "lease_expires": run["lease_expires"],
        }

    def _item_record(self, item_key: str, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "expire_at": expire_at(self.now(), self.settings.retention)}

    def _backoff(self, job: Job, attempt: int) -> float:
        return job.retry.backoff(attempt).total_seconds()

    # -- running ----------------------------------------------------------------------------
    def _run(
        self,
        job: Job,
        request: RunRequest,
        claim: _Claim,
        log: RunLogger,
        on_renew: Callable[[], None] | None,
    ) -> Outcome:
        lease, view = claim.lease, claim.view
        ledger = Ledger()
        if claim.resumed:
            prefix = f"{format_window(request.window)}/"
            ledger = Ledger.from_records(self.store.query(ITEM, job.name, prefix=prefix))
        batch = max(1, min(self.settings.batch_size, (self.store.max_commit_ops - 3) // 2))
        ctx = RunContext(
            job=job,
            window=request.window,
            run_key=request.run_key,
            run_id=str(view.data["run_id"]),
            attempt=view.attempt,
            fence=view.fence,
            payload=request.payload,
            checkpoint=view.data.get("checkpoint"),
            log=log,
            lease=lease,
            ledger=ledger,
            batch_size=batch,
            uncertain=self.settings.uncertain,
            now=self.settings.clock,
            retention=self.settings.retention,
            item_record=self._item_record,
        )
        keeper = LeaseKeeper(
            lease,
            max_runtime=job.max_runtime,
            interval=lease.ttl.total_seconds() * self.settings.renew_fraction,
            on_renew=on_renew,
            on_lost=lambda exc: log.event(
                logging.ERROR, "lease.lost", f"{job.name}: lease lost: {exc}; stopping the handler"
            ),
        )
        with self._active_guard:
            self._active.add(lease)
        if self._shutdown.is_set():
            lease.interrupt(Cancelled("worker is shutting down"))
        started = time.monotonic()
        error: BaseException | None = None
        keeper.start()
        try:
            job.handler(ctx)
            if lease.lost:  # a handler that ignored a lost lease must not complete
                lease.check()
        except BaseException as exc:
            error = exc
        finally:
            keeper.stop()
            with self._active_guard:
                self._active.discard(lease)
        duration_ms = int((time.monotonic() - started) * 1000)
        try:
            if error is None:
                return self._complete(job, request, ctx, lease, duration_ms, log)
            if isinstance(error, LeaseLost) or lease.lost:
                log.event(
                    logging.ERROR,
                    "lease.lost",
                    f"{job.name}: {request.run_key} was taken over by another worker; "
                    "this attempt wrote nothing after that",
                    reason="lease_lost",
                )
                return Outcome(
                    OutcomeKind.LEASE_LOST,
                    request.run_key,
                    ctx.run_id,
                    delay=self._backoff(job, 1),
                    reason="lease_lost",
                )
            return self._fail(job, request, ctx, lease, error, duration_ms, log)
        finally:
            if error is not None and not isinstance(error, Exception):
                raise error  # KeyboardInterrupt / SystemExit after recording

    def _complete(
        self,
        job: Job,
        request: RunRequest,
        ctx: RunContext,
        lease: Lease,
        duration_ms: int,
        log: RunLogger,
    ) -> Outcome:
        now = self.now()
        run_data = {
            **lease.run_data,
            "state": RunState.SUCCEEDED.value,
            "finished_at": iso(now),
            "duration_ms": duration_ms,
            "counters": ctx.counters,
            "error": None,
        }
        status = {
            "status": RunState.SUCCEEDED.value,
            "run_id": ctx.run_id,
            "run_key": request.run_key,
            "finished_at": iso(now),
            "duration_ms": duration_ms,
            "error_snippet": None,
            "last_success_at": iso(now),
            "consecutive_failures": 0,
            "skips_since_success": 0,
            "counters": ctx.counters,
        }
        success = {"last_success_window_ts": int(request.window.timestamp())}
        maximums: dict[str, int] = {}
        if self._newest_window(job, request, lease):
            status.update(success)  # a plain field: no store needs a read to write it
        else:
            maximums = success  # raised, never lowered: Table Storage reads to do that
        if not self._finish(
            lease,
            run_data,
            status,
            {},
            ctx.take_completed(),
            log,
            job,
            request,
            maximums,
        ):
            return Outcome(
                OutcomeKind.LEASE_LOST,
                request.run_key,
                ctx.run_id,
                delay=self._backoff(job, 1),
                reason="lease_lost",
            )
        log.event(
            logging.INFO,
            "run.completed",
            f"{job.name}: {request.run_key} succeeded in {duration_ms} ms",
            status="succeeded",
            duration_ms=duration_ms,
            counters=ctx.counters,
        )
        return Outcome(
            OutcomeKind.SUCCEEDED, request.run_key, ctx.run_id, counters=dict(ctx.counters)
        )

    def _newest_window(self, job: Job, request: RunRequest, lease: Lease) -> bool:
        """True when no later window of ``job`` can have succeeded before this run completes:
        this attempt claimed more than ``lease_margin`` (the worst clock skew) before the next
        window was due, so no later window had fired anywhere, and the job's lock, held since
        the claim, keeps later windows from completing first (a later window that took an
        expired lock over fences this completion out). The success window is then written as a
        plain field; otherwise (catch-up, backfill, late retries, windows shorter than the
        margin) as a maximum, which Table Storage can only apply by reading the status first."""
        claimed = parse_iso(lease.run_data.get("started_at"))
        if claimed is None:
            return False
        return claimed + self.settings.lease_margin < job.schedule.next_after(request.window)

    def _fail(
        self,
        job: Job,
        request: RunRequest,
        ctx: RunContext,
        lease: Lease,
        error: BaseException,
        duration_ms: int,
        log: RunLogger,
    ) -> Outcome:
        now = self.now()
        view = RunView(lease.run_data)
        used = view.attempt - view.budget_start
        permanent = isinstance(error, PermanentError)
        exhausted = used >= job.retry.max_attempts
        text = snippet(error, self.settings.error_snippet_chars)
        state = RunState.DEAD_LETTERED if (permanent or exhausted) else RunState.FAILED
        run_data = {
            **lease.run_data,
            "state": state.value,
            "finished_at": iso(now),
            "duration_ms": duration_ms,
            "counters": ctx.counters,
            "error": text,
        }
        status = {
            "status": state.value,
            "run_id": ctx.run_id,
            "run_key": request.run_key,
            "finished_at": iso(now),
            "duration_ms": duration_ms,
            "error_snippet": text,
            "error_type": type(error).__name__,
        }
        if not self._finish(
            lease,
            run_data,
            status,
            {"consecutive_failures": 1},
            ctx.take_completed(),
            log,
            job,
            request,
            {},
        ):
            return Outcome(
                OutcomeKind.LEASE_LOST,
                request.run_key,
                ctx.run_id,
                delay=self._backoff(job, 1),
                reason="lease_lost",
            )
        interrupted = isinstance(error, RunInterrupted)
        if state is RunState.DEAD_LETTERED:
            reason = "PermanentError" if permanent else "MaxAttemptsExceeded"
            log.event(
                logging.ERROR,
                "run.dead_lettered",
                f"{job.name}: {request.run_key} dead-lettered after {used} attempt(s): {text}",
                reason=reason,
                error_type=type(error).__name__,
                attempts=used,
                duration_ms=duration_ms,
            )
            return Outcome(
                OutcomeKind.DEAD_LETTERED,
                request.run_key,
                ctx.run_id,
                reason=reason,
                detail=f"{used} attempt(s); last error: {text}",
            )
        delay = self._backoff(job, used)
        log.event(
            logging.ERROR,
            "run.failed",
            f"{job.name}: {request.run_key} failed (attempt {used} of "
            f"{job.retry.max_attempts}); retrying in {delay:.0f}s: {text}",
            error_type=type(error).__name__,
            status="failed",
            duration_ms=duration_ms,
            interrupted=interrupted,
            retry_in_s=delay,
            counters=ctx.counters,
            exc_info=None if interrupted else error,
        )
        return Outcome(
            OutcomeKind.FAILED,
            request.run_key,
            ctx.run_id,
            delay=delay,
            reason=type(error).__name__,
            detail=text,
        )

    def _finish(
        self,
        lease: Lease,
        run_data: dict[str, Any],
        status: dict[str, Any],
        increments: dict[str, int],
        item_marks: list[Op],
        log: RunLogger,
        job: Job,
        request: RunRequest,
        maximums: dict[str, int],
    ) -> bool:
        """Final fenced commit: run record, lock release, status, last ledger marks."""
        status_op = Merge(status_key_of(job.name), status, increments, maximums)
        limit = self.store.max_commit_ops - 3
        with lease.mutex:
            while len(item_marks) > limit:  # flush marks that do not fit in the final commit
                chunk, item_marks = item_marks[:limit], item_marks[limit:]
                try:
                    lease.write({}, chunk)
                except LeaseLost:
                    return False
            if lease.lost:
                return False
            ops: list[Op] = [
                Update(lease.run_key, run_data, lease.run_version),
                Delete(lease.lock_key, lease.lock_version),
                status_op,
                *item_marks,
            ]
            try:
                self.store.commit(ops)
            except CommitConflict as exc:
                if exc.index > 1:
                    raise
                lease.interrupt(LeaseLost("run was taken over before it could finish"))
                log.event(
                    logging.ERROR,
                    "lease.lost",
                    f"{job.name}: {request.run_key} was taken over before it finished; "
                    "its result was not recorded",
                    reason="lease_lost",
                )
                return False
        return True
