"""The run protocol: claim, run the handler under a lease, record the outcome.

``Engine.execute(request)`` is what every worker (local, Pub/Sub push, Service Bus trigger)
calls for one delivery. It returns an :class:`Outcome` that says how to settle the delivery;
the engine itself never touches a queue. It orchestrates three parts: claiming
(:mod:`cronwarden.run.claiming`), the lease every fenced write goes through, the completion
included (:mod:`cronwarden.run.lease`), and the run's ledger (:mod:`cronwarden.run.ledger`).

Round trips on the happy path: one commit to claim (create run record + create lock + status
"running"), one commit to complete (run succeeded + delete lock + status), plus one per lease
renewal and one per ledger batch. Only the contended and failure paths read. A worker running a
batch of one job's windows passes the next one as ``then``: each completion then claims the next
window in the same commit (:mod:`.handover`), one commit per run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..jobs.definitions import Job, JobSet
from ..model.errors import (
    Cancelled,
    ContentRefused,
    LeaseLost,
    MalformedRunRequest,
    PermanentError,
    RunInterrupted,
    UnknownJob,
)
from ..model.logs import RunLogger, get_logger
from ..model.ports import Merge, Op, Store
from ..model.records import (
    CONSECUTIVE_FAILURES,
    DEAD_LETTER_REASON,
    LAST_SUCCESS_WINDOW_TS,
    QUARANTINED,
    WATCH_DUE,
    WINDOWS_OPEN,
    RunRecord,
    StatusRecord,
    run_suspicious,
    status_failed,
    status_key_of,
    status_succeeded,
    status_suspicious,
)
from ..model.redaction import snippet, traceback_tail
from ..model.runs import RunRequest, RunState, format_window, new_run_id
from ..model.settlement import Outcome as Outcome
from ..model.settlement import OutcomeKind as OutcomeKind
from ..model.settlement import Settle as Settle  # re-exported: its old home
from ..model.text import storable
from .baseline import baseline_fields
from .claiming import Claim, Claimer, Refusal
from .context import RunContext, RunInfo
from .handover import Handover
from .lease import Clock, Lease, LeaseKeeper
from .ledger import WORST_ITEM_BYTES, Ledger, Uncertain

#: the dead-letter reason of a run whose result (or claim) the store refused for its content
_CONTENT_REFUSED = "ContentRefused"


def utcnow() -> datetime:
    return datetime.now(UTC)


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
    #: seconds a fenced write the store did not apply is retried (backoff) before it fails
    store_retry_for: float = 30.0

    def __post_init__(self) -> None:
        # "quarantine" given as text must not quietly act as redo (the ledger compares members)
        self.uncertain = Uncertain.of(self.uncertain)


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
        #: per thread: the request a completion claimed (:mod:`.handover`) and its claim
        self._handed: dict[int, tuple[RunRequest, Claim]] = {}
        self.claimer = Claimer(
            store,
            worker_id=self.worker_id,
            clock=self.now,
            retention=self.settings.retention,
            error_snippet_chars=self.settings.error_snippet_chars,
        )

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

    def running(self) -> list[str]:
        """Run keys whose handlers this engine runs right now (what a stop would leave)."""
        with self._active_guard:
            return sorted(lease.run.run_key for lease in self._active)

    def execute(
        self,
        request: RunRequest,
        *,
        redrive: int = 0,
        on_renew: Callable[[], None] | None = None,
        after: datetime | None = None,
        then: RunRequest | None = None,
    ) -> Outcome:
        """Run ``request`` once under the protocol; never raises for handler errors.

        ``then``: the request the caller executes next on this thread (the next delivery of
        its batch; none redriven or ordered after another window). When it is a plain window of
        the same job, this run's completion claims it in the same commit (one commit per run
        instead of two: :mod:`.handover`), and the next ``execute(then)`` on this thread runs
        that claim. A caller that passes ``then`` executes it next, or calls
        :meth:`release_handed` (executing another request first gives it back too): the lock
        is released and the window's next delivery takes the run over.

        Raises :class:`~cronwarden.model.errors.UnknownJob` for a job this engine does not know and
        lets store outages propagate (the delivery should then be retried by the caller).
        """
        if request.slot is not None:  # an event consumer's request: its slot is the event key
            job = self.jobs.consumer_job(request.job)
            if job is None:
                raise UnknownJob(f"unknown consumer {request.job!r}")
        else:
            job = self.jobs.get(request.job)
        if job is None:
            raise UnknownJob(f"unknown job {request.job!r}")
        if request.slot is None and job.schedule.floor(request.window) != request.window:
            raise MalformedRunRequest(
                f"window {format_window(request.window)} is not a window of {job.name} "
                f"({job.schedule.cron})"
            )
        handed = self._handed_to(request)
        run_id = handed.run.run_id if handed is not None else new_run_id(self.now())
        log = RunLogger(
            get_logger("run"),
            {
                "job": job.name,
                "run_key": request.run_key,
                "run_id": run_id,
                "window": request.slot_text,
                "worker": self.worker_id,
            },
        )
        if handed is not None:  # claimed by the previous run's completion
            return self._run(
                job, request, self.claimer.started(job, request, handed, log), log, on_renew, then
            )
        if job.after:  # a dependent job runs once every upstream succeeded in the window
            from .dependencies import gate

            waiting = gate(self.store, job, request)
            if waiting is not None:
                log.event(logging.INFO, "run.waiting", f"{job.name}: {request.run_key} {waiting}")
                return Outcome(
                    OutcomeKind.SKIPPED, request.run_key, reason="waiting_on", detail=waiting
                )
        try:
            claimed = self.claim(job, request, run_id=run_id, redrive=redrive, log=log, after=after)
        except ContentRefused as exc:  # the request's own content (its payload): never storable
            text = self._text(snippet(exc, self.settings.error_snippet_chars))
            log.event(
                logging.ERROR,
                "run.dead_lettered",
                f"{job.name}: {request.run_key} dead-lettered: the store refused its claim for "
                f"its content: {text}",
                reason=_CONTENT_REFUSED,
                error_type=type(exc).__name__,
                attempts=0,
            )
            return Outcome(
                OutcomeKind.DEAD_LETTERED,
                request.run_key,
                run_id,
                reason=_CONTENT_REFUSED,
                detail=f"the store refused the claim for its content: {text}",
            )
        if isinstance(claimed, Outcome):
            return claimed
        return self._run(job, request, claimed, log, on_renew, then)

    def _handed_to(self, request: RunRequest) -> Claim | None:
        """The claim the previous run on this thread made for ``request`` (:mod:`.handover`),
        taken; None when there is none. One made for another request is given back (logged
        as ``run.handover_released``): its window runs when its delivery comes again."""
        entry = self._take_handed()
        if entry is None:
            return None
        then, claim = entry
        if (then.run_key, then.reason, then.payload) == (
            request.run_key,
            request.reason,
            request.payload,
        ):
            return claim
        self._give_back(then, claim, f"{request.run_key} was executed instead")
        return None

    def release_handed(self) -> RunRequest | None:
        """Give back the claim this thread's last completion made for the next request
        (:mod:`.handover`), if any: for a caller that will not execute that request after
        all (its batch broke off). The lock is released at once and the window's next
        delivery takes the run over. Returns the request whose claim was given back."""
        entry = self._take_handed()
        if entry is None:
            return None
        self._give_back(entry[0], entry[1], "its worker stopped before running it")
        return entry[0]

    def _take_handed(self) -> tuple[RunRequest, Claim] | None:
        """This thread's handed claim and the request it is for, removed; None when none."""
        if not self._handed:  # the common case, without the lock
            return None
        with self._active_guard:
            return self._handed.pop(threading.get_ident(), None)

    def _give_back(self, then: RunRequest, claim: Claim, why: str) -> None:
        released = claim.lease.give_back()
        self._log.warning(
            "%s: claimed by the previous run's completion, but %s; %s",
            then.run_key,
            why,
            "given back: its next delivery runs it"
            if released
            else "it runs when its delivery comes again, after its lease runs out",
            extra={"event": "run.handover_released", "run_key": then.run_key},
        )

    def _handover(self, job: Job, request: RunRequest, then: RunRequest | None) -> Handover | None:
        """The claim of ``then`` to make in ``request``'s completion, when it can ride there: a
        plain scheduled window of the same job (no dependency gate, not this window), and the
        engine is not shutting down."""
        if (
            then is None
            or then.job != job.name
            or then.slot is not None
            or request.slot is not None
            or job.after
            or then.run_key == request.run_key
            or self._shutdown.is_set()
            or job.schedule.floor(then.window) != then.window
        ):
            return None
        return self.claimer.handover(job, then, new_run_id(self.now()), self.lease_ttl(job))

    # -- the three parts, public for tests and tools -----------------------------------------
    def claim(
        self,
        job: Job,
        request: RunRequest,
        *,
        run_id: str | None = None,
        redrive: int = 0,
        log: RunLogger | None = None,
        after: datetime | None = None,
    ) -> Claim | Outcome:
        """Claim ``request``'s run key for this worker: a :class:`~cronwarden.run.claiming.Claim`
        (the lease is then this caller's to write through and finish), or the outcome that
        refuses it. ``execute`` does this, then runs the handler and records its result.
        ``after``: the window a catch-up or backfill request follows in its batch; it waits
        while that one can still run."""
        run_id = run_id or new_run_id(self.now())
        log = log or RunLogger(get_logger("run"), {"job": job.name, "run_key": request.run_key})
        claimed = self.claimer.claim(
            job, request, run_id, redrive, self.lease_ttl(job), log, after=after
        )
        if isinstance(claimed, Refusal):
            return Outcome(
                OutcomeKind(claimed.kind.value),
                request.run_key,
                delay=claimed.delay,
                reason=claimed.reason,
                detail=claimed.detail,
                dead_letter_reason=claimed.dead_letter_reason,
            )
        return claimed

    def ledger(self, job: Job, claim: Claim) -> Ledger:
        """The ledger of a claimed run (read from the store when an earlier attempt ran)."""
        # a batch is one or more pages (one op each); bound it so that its new pages and the
        # previous batch's fit one commit beside the run and lock even at the worst item size
        capabilities = self.store.capabilities
        per_page = max(1, capabilities.max_page_bytes // WORST_ITEM_BYTES)
        pages = max(1, (capabilities.max_commit_ops - 3) // 2)
        batch = max(1, min(self.settings.batch_size, per_page * pages))
        ledger = Ledger(
            job=job.name,
            window=claim.run.window,
            run_key=claim.run.run_key,
            run_id=claim.run.run_id,
            batch_size=batch,
            uncertain=self.settings.uncertain,
            retention=self.settings.retention,
            clock=self.now,
            fence=claim.run.fence,
            max_page_bytes=capabilities.max_page_bytes,
        )
        if claim.resumed:
            ledger.load(self.store)
        return ledger

    def _backoff(self, job: Job, attempt: int) -> float:
        return job.retry.backoff(attempt).total_seconds()

    # -- running ----------------------------------------------------------------------------
    def _run(
        self,
        job: Job,
        request: RunRequest,
        claim: Claim,
        log: RunLogger,
        on_renew: Callable[[], None] | None,
        then: RunRequest | None = None,
    ) -> Outcome:
        lease, run = claim.lease, claim.run
        info = RunInfo(
            job=job,
            window=request.window,
            run_key=request.run_key,
            run_id=run.run_id,
            attempt=run.attempt,
            fence=run.fence,
            payload=request.payload,
            checkpoint=run.checkpoint,
        )
        lease.retry_for = self.settings.store_retry_for
        ledger = self.ledger(job, claim)
        ctx = RunContext(info, lease=lease, ledger=ledger, log=log)
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
        limit_ms = int(job.max_runtime.total_seconds() * 1000)
        if duration_ms > limit_ms:  # marked on the run record and the status by the completion
            lease.run = lease.run.with_(overran=True)
            log.event(
                logging.WARNING,
                "run.overran",
                f"{job.name}: {request.run_key} ran {duration_ms} ms, past its max_runtime of "
                f"{limit_ms} ms (the handler did not stop at the deadline: call ctx.check())",
                duration_ms=duration_ms,
                max_runtime_ms=limit_ms,
            )
        try:
            if error is None:
                handover = self._handover(job, request, then)
                return self._complete(job, request, ctx, ledger, lease, duration_ms, log, handover)
            if isinstance(error, LeaseLost) or lease.lost:
                log.event(
                    logging.ERROR,
                    "lease.lost",
                    f"{job.name}: {request.run_key} was taken over by another worker; "
                    "this attempt wrote nothing after that",
                    reason="lease_lost",
                )
                return self._lease_lost(job, request, ctx)
            return self._fail(job, request, ctx, ledger, lease, error, duration_ms, log)
        finally:
            if error is not None and not isinstance(error, Exception):
                raise error  # KeyboardInterrupt / SystemExit after recording

    def _lease_lost(self, job: Job, request: RunRequest, ctx: RunContext) -> Outcome:
        return Outcome(
            OutcomeKind.LEASE_LOST,
            request.run_key,
            ctx.run_id,
            delay=self._backoff(job, 1),
            reason="lease_lost",
        )

    def _complete(
        self,
        job: Job,
        request: RunRequest,
        ctx: RunContext,
        ledger: Ledger,
        lease: Lease,
        duration_ms: int,
        log: RunLogger,
        handover: Handover | None = None,
    ) -> Outcome:
        now = self.now()
        run = lease.run.with_(
            state=RunState.SUCCEEDED,
            finished_at=now,
            duration_ms=duration_ms,
            counters=ctx.counters,
            error=None,
            traceback=None,
        )
        # Expectations and the duration baseline ride in this same commit (no read).
        reasons = job.expect.breaches(ctx.counters, duration_ms) if job.expect else []
        if reasons:
            run = run_suspicious(run, reasons)
        fields = status_succeeded(run, now, duration_ms, ctx.counters)
        fields.update(baseline_fields(job, request.window, duration_ms, now))
        success = {LAST_SUCCESS_WINDOW_TS: int(request.window.timestamp())}
        maximums: dict[str, int] = {}
        if self._success_window_is_plain(job, request, lease):
            fields.update(success)
            # Only the newest window sets or clears ``suspicious``: a late catch-up run must
            # not hide a newer suspicious one (its reasons stay in its run record and log).
            fields.update(status_suspicious(run, reasons, now))
        else:
            maximums = success  # raised, never lowered
            if job.timed and job.schedule.floor(now) <= request.window:
                # The latest window by this clock (a run claimed late in its window, as
                # `run --once` does): nothing newer can have set or cleared ``suspicious`` yet
                # (the job's lock is held), so its verdict belongs on the status record too.
                fields.update(status_suspicious(run, reasons, now))
        quarantined = sorted(set(ledger.quarantined))
        run = run.with_(quarantined=quarantined)  # this attempt's, not a taken-over record's
        if quarantined:  # not a plain success: recorded until an operator resolves them
            fields[QUARANTINED] = self._quarantine_map(job, ledger.window, quarantined)
        if quarantined or reasons or job.slow_factor is not None:  # judged at the next check
            fields[WATCH_DUE] = 0
        closed = {WINDOWS_OPEN: -1} if self.store.capabilities.atomic_increment else {}
        status = Merge(status_key_of(job.name), fields, closed, maximums=maximums)
        # completion events of dependents ride in this commit (the outbox: no round trip)
        outbox = self._outbox(job, request, now)
        try:
            recorded = self._record(job, request, lease, run, status, ledger, log, outbox, handover)
        except ContentRefused as exc:
            return self._refused(job, request, ctx, lease, exc, duration_ms, log)
        if not recorded:
            return self._lease_lost(job, request, ctx)
        if quarantined:
            shown = ", ".join(quarantined[:20]) + (" …" if len(quarantined) > 20 else "")
            log.event(
                logging.WARNING,
                "run.quarantined",
                f"{job.name}: {request.run_key} succeeded with {len(quarantined)} quarantined "
                f"item(s) needing a human: {shown} (cronwarden ledger resolve)",
                status="succeeded",
                quarantined=quarantined,
            )
            return Outcome(
                OutcomeKind.SUCCEEDED,
                request.run_key,
                ctx.run_id,
                reason="quarantined",
                detail=f"{len(quarantined)} quarantined item(s): {shown}",
                counters=dict(ctx.counters),
            )
        log.event(
            logging.INFO,
            "run.completed",
            f"{job.name}: {request.run_key} succeeded in {duration_ms} ms",
            status="succeeded",
            duration_ms=duration_ms,
            counters=ctx.counters,
            **({"suspicious": reasons} if reasons else {}),
        )
        detail = ""
        if reasons:
            detail = "suspicious: " + "; ".join(reasons)
            log.event(
                logging.WARNING,
                "run.suspicious",
                f"{job.name}: {request.run_key} succeeded but looks wrong: {'; '.join(reasons)}",
                status="succeeded",
                suspicious=reasons,
                counters=ctx.counters,
                duration_ms=duration_ms,
            )
        return Outcome(
            OutcomeKind.SUCCEEDED,
            request.run_key,
            ctx.run_id,
            detail=detail,
            counters=dict(ctx.counters),
        )

    def _outbox(self, job: Job, request: RunRequest, now: datetime) -> list[Op]:
        if request.slot is not None or not self.jobs.dependents_of(job.name):
            return []
        from .dependencies import outbox_ops

        return outbox_ops(self.jobs, job, request.slot_text, now)

    def _quarantine_map(self, job: Job, window: str, keys: list[str]) -> dict[str, list[str]]:
        """The status's unresolved quarantined items with this window's ``keys`` (one read,
        on this path only: a merge sets the whole field)."""
        stored = self.store.get(status_key_of(job.name))
        current = StatusRecord.from_data(stored.data).quarantined if stored else {}
        current[window] = keys
        return current

    def _success_window_is_plain(self, job: Job, request: RunRequest, lease: Lease) -> bool:
        """Whether the completion writes the job's success window as a plain field rather than
        as a maximum (raised, never lowered).

        A plain field is correct when no later window of ``job`` can have succeeded before this
        run completes: this attempt claimed more than ``lease_margin`` (the worst clock skew)
        before the next window was due, so no later window had fired anywhere, and the job's
        lock, held since the claim, keeps later windows from completing first (a later window
        that took an expired lock over fences this completion out). Otherwise (catch-up,
        backfill, late retries, windows shorter than the margin) only a maximum is correct.

        A plain field is never dearer than a maximum, and on a store without
        ``capabilities.atomic_maximum`` it saves the read the adapter needs to apply one, so
        the engine writes it whenever it is correct.
        """
        claimed = lease.run.started_at
        if claimed is None:
            return False
        return claimed + self.settings.lease_margin < job.schedule.next_after(request.window)

    def _fail(
        self,
        job: Job,
        request: RunRequest,
        ctx: RunContext,
        ledger: Ledger,
        lease: Lease,
        error: BaseException,
        duration_ms: int,
        log: RunLogger,
    ) -> Outcome:
        now = self.now()
        claimed = lease.run
        used = claimed.attempt - claimed.budget_start
        refused = isinstance(error, ContentRefused)  # a ledger batch or checkpoint refused
        permanent = refused or isinstance(error, PermanentError)
        exhausted = used >= job.retry.max_attempts
        text = self._text(snippet(error, self.settings.error_snippet_chars))
        state = RunState.DEAD_LETTERED if (permanent or exhausted) else RunState.FAILED
        reason = "PermanentError" if permanent else "MaxAttemptsExceeded"
        if refused:
            reason = _CONTENT_REFUSED
        extra = (
            {**claimed.extra, DEAD_LETTER_REASON: reason}
            if state is RunState.DEAD_LETTERED
            else claimed.extra
        )
        run = claimed.with_(
            state=state,
            finished_at=now,
            duration_ms=duration_ms,
            counters=ctx.counters,
            error=text,
            quarantined=sorted(set(ledger.quarantined)),
            traceback=self._text(traceback_tail(error)),
            extra=extra,
        )
        status = Merge(
            status_key_of(job.name),
            status_failed(run, state, now, duration_ms, text, self._text(type(error).__name__)),
            {CONSECUTIVE_FAILURES: 1},
        )
        try:
            recorded = self._record(job, request, lease, run, status, ledger, log)
        except ContentRefused as exc:
            return self._refused(job, request, ctx, lease, exc, duration_ms, log)
        if not recorded:
            return self._lease_lost(job, request, ctx)
        interrupted = isinstance(error, RunInterrupted)
        if state is RunState.DEAD_LETTERED:
            return self._dead_lettered(
                job,
                request,
                ctx,
                log,
                reason=reason,
                error_type=type(error).__name__,
                used=used,
                duration_ms=duration_ms,
                why=f" after {used} attempt(s): {text}",
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

    def _text(self, text: str) -> str:
        """``text`` (not written by cronwarden: an error message, a traceback, command output)
        as text this store can hold."""
        return storable(text, self.store.capabilities.max_text_bytes)

    def _refused(
        self,
        job: Job,
        request: RunRequest,
        ctx: RunContext,
        lease: Lease,
        refusal: ContentRefused,
        duration_ms: int,
        log: RunLogger,
    ) -> Outcome:
        """The run's result was refused by the store for its content (a counter name, a
        checkpoint, a ledger page it cannot hold): retrying cannot help, so the run is
        dead-lettered (reason ``ContentRefused``) with a record of the engine's own text only,
        without the refused parts (counters, ledger marks, outbox). Raises when even that is
        refused (the store is then broken, not the run)."""
        now = self.now()
        text = self._text(snippet(refusal, self.settings.error_snippet_chars))
        state = RunState.DEAD_LETTERED
        run = lease.run.with_(
            state=state,
            finished_at=now,
            duration_ms=duration_ms,
            counters={},
            error=text,
            traceback=None,
            extra={**lease.run.extra, DEAD_LETTER_REASON: _CONTENT_REFUSED},
        )
        status = Merge(
            status_key_of(job.name),
            status_failed(run, state, now, duration_ms, text, _CONTENT_REFUSED),
            {CONSECUTIVE_FAILURES: 1},
        )
        try:
            lease.finish(run, status)
        except LeaseLost:
            return self._lease_lost(job, request, ctx)
        used = lease.run.attempt - lease.run.budget_start
        return self._dead_lettered(
            job,
            request,
            ctx,
            log,
            reason=_CONTENT_REFUSED,
            error_type=type(refusal).__name__,
            used=used,
            duration_ms=duration_ms,
            why=f": the store refused its result for its content: {text}",
            detail=f"{used} attempt(s); the store refused the result for its content: {text}",
        )

    def _dead_lettered(
        self,
        job: Job,
        request: RunRequest,
        ctx: RunContext,
        log: RunLogger,
        *,
        reason: str,
        error_type: str,
        used: int,
        duration_ms: int,
        why: str,
        detail: str,
    ) -> Outcome:
        """Log ``run.dead_lettered`` (``why``: the rest of the line) for a run whose
        dead-lettered record was just committed, and return its outcome."""
        log.event(
            logging.ERROR,
            "run.dead_lettered",
            f"{job.name}: {request.run_key} dead-lettered{why}",
            reason=reason,
            error_type=error_type,
            attempts=used,
            duration_ms=duration_ms,
        )
        return Outcome(
            OutcomeKind.DEAD_LETTERED, request.run_key, ctx.run_id, reason=reason, detail=detail
        )

    def _record(
        self,
        job: Job,
        request: RunRequest,
        lease: Lease,
        run: RunRecord,
        status: Merge,
        ledger: Ledger,
        log: RunLogger,
        extra: Sequence[Op] = (),
        handover: Handover | None = None,
    ) -> bool:
        """Record the run's result through the lease (run record, lock release, status, the
        ledger's last marks, then ``extra``: the outbox, last so that it is always in the final
        commit); False when the run was taken over first (nothing recorded). ``handover``:
        the next window's claim, kept for this thread's next ``execute`` when it rode along."""
        sent = ledger.final()
        try:
            handed = lease.finish(run, status, [*sent.ops, *extra], handover)
        except LeaseLost:
            log.event(
                logging.ERROR,
                "lease.lost",
                f"{job.name}: {request.run_key} was taken over before it finished; "
                "its result was not recorded",
                reason="lease_lost",
            )
            return False
        ledger.acknowledge(sent)
        if handed is not None and handover is not None:
            with self._active_guard:
                self._handed[threading.get_ident()] = (
                    handover.request,
                    Claim(handed, handover.run),
                )
        return True
