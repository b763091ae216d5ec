"""The lease a run holds while it executes: fenced writes and background renewal.

A run owns two records: its run record (carrying the fence) and the job's lock record (the
overlap guard). :class:`Lease` is the only code that writes them from the claim on: every
fenced write of the run goes through it, the last one included. Every write is one atomic
commit that compare-and-sets *both* records against the versions this owner last wrote:

* :meth:`Lease.write` (a checkpoint, a ledger batch, a renewal) extends the lease, so a progress
  write doubles as a renewal;
* :meth:`Lease.finish` records the run's result, releases the lock and merges the job's status
  in one commit (with the ledger's last marks);
* an owner whose lease was taken over (its versions are stale) can write nothing: the commit
  is refused, the lease is marked lost and :class:`~cronwarden.model.errors.LeaseLost` is raised.
  One exception: a pause (or resume) rewrites the lock a live run holds to carry the pause
  without changing its owner; a write refused on the lock alone reads it, adopts the pause and
  its version while it still names this owner and run, and writes again. The last write then
  hands the lock to the pause instead of deleting it.

Store failures (see :mod:`cronwarden.model.errors`): a write the store did not apply
(:class:`~cronwarden.model.errors.StoreUnavailable`) is sent again as it is, with backoff, for up to
:attr:`Lease.retry_for` seconds while the lease lasts. A write of unknown outcome
(:class:`~cronwarden.model.errors.CommitOutcomeUnknown`) is never assumed failed: the run record is
read back, and the write id each write stamps on it says whether this very write landed (the
lease is kept, the versions read are adopted) or not (the same write is sent again, its
versions still right); a record someone else wrote means the lease was taken over.

A write of unknown outcome that could not be read back before its retries ended (the store
unreadable past :attr:`Lease.retry_for`, the keeper stopped) is remembered as *unsettled*: a
later write refused on the run or lock record first reads the run record back, and when it
carries an unsettled write's id that write did land (a renewal whose reply was lost): its records
and versions are adopted and the refused write is sent again. Only a record no write of this
owner produced means a takeover; an ambiguous renewal never ends its own run as ``lease_lost``.

The :class:`LeaseKeeper` renews (on the process's one renewal scheduler, see :mod:`.renewal`:
no thread per run) when no write happened for a third of the TTL, stops renewing once the run
passes its max runtime (the handler is then asked to stop, and the lease runs out so another
worker can take over), and marks the lease lost when renewal is refused or when the lease
expires because the store could not be reached.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ..model.errors import (
    Cancelled,
    CommitConflict,
    CommitOutcomeUnknown,
    ContentRefused,
    LeaseLost,
    RunInterrupted,
    StoreUnavailable,
)
from ..model.logs import get_logger
from ..model.ports import Create, Delete, Key, Merge, Op, Store, Update, Version
from ..model.records import LockRecord, RunRecord, iso, parse_iso
from ..model.redaction import redact
from .handover import Handover, compose
from .renewal import Ticket, scheduler

#: how often one write adopts a lock rewritten under it by a pause or resume before it gives up
_LOCK_ADOPTIONS = 3

Clock = Callable[[], datetime]
_log = get_logger("lease")


def new_write_id() -> str:
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class _Unsettled:
    """A fenced write whose outcome is unknown: what it put on the records, should it have
    landed (``lock`` is None when it did not write the lock)."""

    write_id: str
    run: RunRecord
    lock: LockRecord | None
    expires: datetime | None


class Lease:
    """The run and lock records owned by one execution, with the versions last written."""

    #: seconds a write the store did not apply is retried before the error is raised
    retry_for: float = 30.0
    #: first backoff between retries (doubling, jittered, at most 2 s)
    retry_backoff: float = 0.05

    def __init__(
        self,
        store: Store,
        clock: Clock,
        ttl: timedelta,
        run_key: Key,
        run: RunRecord | Mapping[str, Any],
        run_version: Version,
        lock_key: Key,
        lock: LockRecord | Mapping[str, Any],
        lock_version: Version,
    ) -> None:
        """``run`` and ``lock`` as claimed (records, or their data as stored)."""
        if not isinstance(run, RunRecord):
            run = RunRecord.from_data(run)
        if not isinstance(lock, LockRecord):
            lock = LockRecord.from_data(lock)
        self.store = store
        self.clock = clock
        self.ttl = ttl
        self.run_key, self.run, self.run_version = run_key, run, run_version
        self.lock_key, self.lock, self.lock_version = lock_key, lock, lock_version
        self.mutex = threading.RLock()
        self.stop_event = threading.Event()
        self._interruption: RunInterrupted | None = None
        self.last_write = clock()
        # as readers see it: the stored text has millisecond precision
        stored = parse_iso(iso(run.lease_expires)) if run.lease_expires else None
        self._expires: datetime = stored or self.last_write + ttl
        self.renewals = 0
        #: set to stop a write's retries at once (the keeper's renewal when the run ends)
        self.quit_retrying = threading.Event()
        self.resolved_unknown = 0  #: commits of unknown outcome settled by reading back
        #: writes of unknown outcome not yet read back (see the module docstring)
        self._unsettled: list[_Unsettled] = []
        self.retried_unavailable = 0  #: writes sent again after the store did not apply them
        #: when the run must stop by this owner's clock (claim time + max runtime; set by the
        #: keeper). Past it the owner no longer trusts its lease: a reader whose clock runs up
        #: to ``lease_margin`` ahead may already judge the lease expired and take over.
        self.deadline: datetime | None = None

    @property
    def run_data(self) -> dict[str, Any]:
        """The run record's data as last written (a copy)."""
        return self.run.to_data()

    # -- cancellation -----------------------------------------------------------------------
    @property
    def interruption(self) -> RunInterrupted | None:
        return self._interruption

    @property
    def lost(self) -> bool:
        return isinstance(self._interruption, LeaseLost)

    def interrupt(self, error: RunInterrupted) -> None:
        """Ask the handler to stop; the first reason wins, except that lease loss overrides."""
        with self.mutex:
            if self._interruption is None or isinstance(error, LeaseLost):
                self._interruption = error
        self.stop_event.set()

    def check(self) -> None:
        """Raise the pending interruption; also self-fence once the lease has run out by this
        process's own clock (a paused process must not start another side effect), and stop
        at the run's deadline: the lease's margin is there for clock skew, not for this owner."""
        now = self.clock()
        if (
            self._interruption is None
            and now < self._expires
            and (self.deadline is None or now < self.deadline)
        ):
            return  # the usual case, once per ledger item: nothing to do
        if self._interruption is None and now >= self.expires_at():
            self.interrupt(
                LeaseLost(
                    f"lease on {self.run.run_key} expired at "
                    f"{iso(self.expires_at())} before it could be renewed (process paused?)"
                )
            )
        if self._interruption is None and self.deadline is not None and now >= self.deadline:
            self.interrupt(
                Cancelled(
                    f"run passed its max runtime (deadline {iso(self.deadline)}); its lease "
                    "margin is reserved for clock skew between workers"
                )
            )
        if self._interruption is not None:
            raise self._interruption

    # -- writes -----------------------------------------------------------------------------
    def write(self, extra: Sequence[Op] = (), **run_changes: Any) -> list[Version]:
        """Fenced commit: CAS run + lock (lease extended), plus ``extra`` ops, atomically.

        ``run_changes`` are :class:`~cronwarden.model.records.RunRecord` fields to change (e.g.
        ``checkpoint``). Returns the versions of ``extra``. Raises LeaseLost (and marks the
        lease lost) when either record changed under us.
        """
        with self.mutex:
            if self.lost:
                raise self._interruption  # type: ignore[misc]
            for _ in range(_LOCK_ADOPTIONS + 1):
                expires_at = self.clock() + self.ttl
                write_id = new_write_id()
                run = self.run.with_(**run_changes, lease_expires=expires_at, write_id=write_id)
                lock = replace(self.lock, lease_expires=expires_at)
                ops: list[Op] = [
                    Update(self.run_key, run.to_data(), self.run_version),
                    Update(self.lock_key, lock.to_data(), self.lock_version),
                    *extra,
                ]
                written = _Unsettled(write_id, run, lock, expires_at)
                try:
                    versions = self._commit(ops, write_id, lock_kept=True, unsettled=written)
                    break
                except CommitConflict as exc:
                    if exc.index <= 1 and self._settle_earlier():
                        continue  # an earlier write of ours had landed: write again on it
                    if exc.index == 1 and self._adopt_lock():
                        continue  # a pause (or its resume) changed our lock: write again
                    if exc.index <= 1:
                        raise self._taken_over() from exc
                    raise
            else:
                raise self._taken_over()
            self.run, self.run_version = run, versions[0]
            self.lock, self.lock_version = lock, versions[1]
            self.last_write = self.clock()
            self._expires = expires_at
            self._unsettled.clear()  # none of them can land now: the versions moved on
            return versions[2:]

    def mark(self, extra: Sequence[Op]) -> list[Version]:
        """Fenced commit of progress marks (``extra``) that leaves the lease as it is: a
        compare-and-set of the run record alone (a new ``write_id``, the same expiry), plus
        ``extra``, atomically. One record write fewer than :meth:`write`: the lock is not
        touched, so this neither renews the lease nor postpones the keeper's renewal.

        Fencing holds: an owner taking this run over writes the run record first, so the
        compare-and-set fails (LeaseLost, the lease marked lost). A takeover of the *lock* by
        another run key needs the lease expired, which :meth:`check` refuses before any mark
        by this owner's clock. Returns the versions of ``extra``.
        """
        with self.mutex:
            if self.lost:
                raise self._interruption  # type: ignore[misc]
            write_id = new_write_id()
            run = self.run.with_(write_id=write_id)
            ops: list[Op] = [Update(self.run_key, run.to_data(), self.run_version), *extra]
            for _ in range(2):
                written = _Unsettled(write_id, run, None, None)
                try:
                    versions = self._commit(
                        ops, write_id, lock_kept=False, lock_written=False, unsettled=written
                    )
                    break
                except CommitConflict as exc:
                    if exc.index == 0 and self._settle_earlier():
                        run = self.run.with_(write_id=write_id)
                        ops = [Update(self.run_key, run.to_data(), self.run_version), *extra]
                        continue  # an earlier write of ours had landed: mark on top of it
                    if exc.index == 0:
                        raise self._taken_over() from exc
                    raise
            else:
                raise self._taken_over()
            self.run, self.run_version = run, versions[0]
            self._unsettled.clear()
            return versions[1:]

    def renew(self) -> None:
        self.write()
        self.renewals += 1

    def finish(
        self,
        run: RunRecord,
        status: Merge,
        marks: Sequence[Op] = (),
        handover: Handover | None = None,
    ) -> Lease | None:
        """The last fenced commit: ``run`` (its result) replaces the run record, the lock is
        released, ``status`` is merged and ``marks`` (the ledger's last marks) are written,
        atomically. Marks that do not fit in one commit with the rest go first, in fenced
        writes of their own.

        ``handover``: the claim of the next window of the same job, made in the same commit
        when it can be (:mod:`.handover`): the lock passes to it instead of being released.
        Returns that run's lease when it did; None when the completion was made alone (the
        next window is then claimed as usual).

        Raises LeaseLost (nothing of the result recorded) when the run was taken over.
        """
        limit = self.store.max_commit_ops - 3
        pending = list(marks)
        with self.mutex:
            while len(pending) > limit:  # flush marks that do not fit in the final commit
                chunk, pending = pending[:limit], pending[limit:]
                self.write(chunk)
            if self.lost:
                raise self._interruption  # type: ignore[misc]
            if handover is not None:
                done, handed = self._hand_over(run, status, pending, handover)
                if done:
                    return handed
            for _ in range(_LOCK_ADOPTIONS + 1):
                write_id = new_write_id()
                run = run.with_(write_id=write_id)
                ops: list[Op] = [
                    Update(self.run_key, run.to_data(), self.run_version),
                    self._release(),
                    status,
                    *pending,
                ]
                try:
                    versions = self._commit(ops, write_id, lock_kept=False)
                    break
                except CommitConflict as exc:
                    if exc.index <= 1 and self._settle_earlier():
                        continue  # an earlier write of ours had landed: finish on top of it
                    if exc.index == 1 and self._adopt_lock():
                        continue
                    if exc.index > 1:
                        raise
                    raise self._taken_over("before it could finish") from exc
            else:
                raise self._taken_over("before it could finish")
            self.run, self.run_version = run, versions[0]
            return None

    def _hand_over(
        self, run: RunRecord, status: Merge, pending: list[Op], handover: Handover
    ) -> tuple[bool, Lease | None]:
        """The completion and the next window's claim in one commit (see :mod:`.handover`):
        ``(True, its lease)`` when it landed; ``(False, None)`` when nothing of it did (the
        caller completes alone). Never retried: any doubt falls back to the usual path."""
        status_both = compose(status, handover.status)
        if (
            status_both is None
            or self._unsettled  # an earlier write's outcome is unknown: the careful path
            or self.lock.pause is not None  # the lock is handed to its pause, not a run
            or len(pending) + 4 > self.store.max_commit_ops
        ):
            return False, None
        write_id = new_write_id()
        run = run.with_(write_id=write_id)
        ops: list[Op] = [
            Update(self.run_key, run.to_data(), self.run_version),
            Update(self.lock_key, handover.lock.to_data(), self.lock_version),
            status_both,
            *pending,
            Create(handover.run_key, handover.run.to_data()),
        ]
        try:
            versions: list[Version] = self.store.commit(ops)
        except CommitOutcomeUnknown:  # (a StoreUnavailable: caught first)
            try:
                landed = self._handed_back(write_id, handover)
            except StoreUnavailable:
                landed = None
            if landed is None:
                # not landed as far as we can tell; should it land after all, the usual
                # path's refused write finds it by its write id and finishes on top of it
                self._unsettled.append(_Unsettled(write_id, run, handover.lock, None))
                return False, None
            versions = landed
        except (CommitConflict, StoreUnavailable, ContentRefused, ValueError, TypeError):
            # refused (the next run's payload included) or not applied: nothing of it landed
            return False, None
        self.run, self.run_version = run, versions[0]
        self.last_write = self.clock()
        if versions[1] is None or versions[-1] is None:  # landed, the next run taken since
            return True, None
        return True, Lease(
            self.store,
            self.clock,
            self.ttl,
            handover.run_key,
            handover.run,
            versions[-1],
            self.lock_key,
            handover.lock,
            versions[1],
        )

    def _handed_back(self, write_id: str, handover: Handover) -> list[Version] | None:
        """After a hand-over commit of unknown outcome: its versions (run, lock, ..., next run)
        when it landed, the lock's and next run's ``None`` when they no longer name the next
        owner; ``None`` when it did not land (this run's record lacks its write id)."""
        stored = self.store.get(self.run_key)
        if stored is None or stored.data.get("write_id") != write_id:
            return None
        lock, following = self.store.get(self.lock_key), self.store.get(handover.run_key)
        owner = handover.lock.owner
        ours = (
            lock is not None
            and following is not None
            and lock.data.get("owner") == owner
            and following.data.get("owner") == owner
        )
        return [
            stored.version,
            lock.version if ours and lock is not None else None,
            following.version if ours and following is not None else None,
        ]

    def give_back(self) -> bool:
        """Release a claim whose handler never ran (a handed claim its worker did not execute,
        :mod:`.handover`): the lock is deleted and the run record's lease ends now, so other
        windows of the job are not held back and the window's next delivery takes the run over
        at once. True when that landed; False (logged) when the store refused or failed it:
        the lease then runs out as a killed worker's would."""
        with self.mutex:
            run = self.run.with_(lease_expires=self.clock(), write_id=new_write_id())
            try:
                self.store.commit(
                    [
                        Update(self.run_key, run.to_data(), self.run_version),
                        Delete(self.lock_key, self.lock_version),
                    ]
                )
            except Exception as exc:  # best effort: the lease runs out by itself
                _log.warning(
                    "%s: could not give back an unstarted claim (%s); its lease runs out",
                    self.run.run_key,
                    redact(str(exc))[:300],
                    extra={"event": "lease.give_back_failed", "run_key": self.run.run_key},
                )
                return False
            self.interrupt(LeaseLost(f"{self.run.run_key}: claim given back before it ran"))
            return True

    def _release(self) -> Op:
        """The lock's last op: deleted, or handed to the pause it carries (still in force)."""
        if self.lock.pause is not None and self.lock.paused(self.clock()):
            held = LockRecord.for_pause(self.run.job, self.lock.pause, self.clock())
            return Update(self.lock_key, held.to_data(), self.lock_version)
        return Delete(self.lock_key, self.lock_version)

    def settle_unknown(self) -> bool:
        """Read back the writes of unknown outcome this lease could not resolve when they were
        sent; True when one of them had landed (its records, versions and expiry are adopted:
        the lease lasts longer than this owner knew). Store errors propagate."""
        with self.mutex:
            return self._settle_earlier()

    def _settle_earlier(self) -> bool:
        """After a write of ours was refused on the run or lock record: whether an earlier
        write of unknown outcome (:class:`_Unsettled`) landed, which would explain the refusal.
        If so its records and versions are adopted (the caller writes again); else False (the
        caller judges the refusal as before)."""
        if not self._unsettled:
            return False
        stored = self.store.get(self.run_key)
        found = stored.data.get("write_id") if stored is not None else None
        landed = next((w for w in self._unsettled if w.write_id == found), None)
        if stored is None or landed is None:
            return False
        lock, lock_version = self.lock, self.lock_version
        if landed.lock is not None:
            current = self.store.get(self.lock_key)
            if current is None:
                return False
            held = LockRecord.from_data(current.data)
            if held.owner != landed.lock.owner or held.run_id != landed.lock.run_id:
                return False
            lock, lock_version = replace(landed.lock, pause=held.pause), current.version
        self.run, self.run_version = landed.run, stored.version
        self.lock, self.lock_version = lock, lock_version
        if landed.expires is not None:
            self._expires = landed.expires
        self._unsettled.clear()
        self.resolved_unknown += 1
        _log.warning(
            "%s: an earlier write of unknown outcome had landed; its versions are adopted",
            self.run.run_key,
            extra={"event": "store.unknown_resolved", "run_key": self.run.run_key, "landed": True},
        )
        return True

    def _adopt_lock(self) -> bool:
        """After our lock op was refused while the run record was not: a pause or a resume
        (:mod:`cronwarden.jobs.pause`) rewrote the lock this run holds. True (the lock's pause and
        version adopted) when the lock still names this owner and run; False otherwise."""
        stored = self.store.get(self.lock_key)
        if stored is None:
            return False
        current = LockRecord.from_data(stored.data)
        if current.owner != self.lock.owner or current.run_id != self.lock.run_id:
            return False
        self.lock, self.lock_version = replace(self.lock, pause=current.pause), stored.version
        return True

    def _commit(
        self,
        ops: list[Op],
        write_id: str,
        *,
        lock_kept: bool,
        lock_written: bool = True,
        unsettled: _Unsettled | None = None,
    ) -> list[Version]:
        """``store.commit(ops)``, resolving failures that are not refusals (see the module
        docstring). Raises CommitConflict, LeaseLost (read back: another owner wrote the run
        record) or the store's last error once :attr:`retry_for` or the lease ran out; a write
        that may have landed is then remembered as ``unsettled`` (when given)."""
        give_up = time.monotonic() + self.retry_for
        pause = self.retry_backoff
        sent_before = False  #: an earlier attempt may still land (a store that was frozen)
        error: StoreUnavailable
        while True:
            try:
                return self.store.commit(ops)
            except CommitConflict:
                if not sent_before:
                    raise
                # refused because our own earlier attempt landed meanwhile?
                try:
                    landed = self._read_back(
                        write_id, lock_kept, len(ops), resend=False, lock_written=lock_written
                    )
                except StoreUnavailable as unreadable:  # cannot tell yet: try again below
                    error = unreadable
                else:
                    if landed is not None:
                        return landed
                    raise
            except CommitOutcomeUnknown as exc:
                error = exc
                sent_before = True
                with contextlib.suppress(StoreUnavailable):  # unreadable: try again below
                    landed = self._read_back(
                        write_id, lock_kept, len(ops), lock_written=lock_written
                    )
                    self.resolved_unknown += 1
                    self._note("store.unknown_resolved", exc, landed=landed is not None)
                    if landed is not None:
                        return landed
            except StoreUnavailable as exc:
                error = exc
            if (
                time.monotonic() >= give_up
                or self.clock() >= self._expires
                or self.quit_retrying.wait(pause * (0.5 + random.random() / 2))
            ):
                if sent_before and unsettled is not None:
                    self._unsettled.append(unsettled)
                raise error
            self.retried_unavailable += 1
            self._note("store.retry", error)
            pause = min(2.0, pause * 2)

    def _note(self, event: str, error: BaseException, **fields: object) -> None:
        what = {
            "store.retry": "store did not apply a write; sending it again",
            "store.unknown_resolved": "commit of unknown outcome read back",
        }[event]
        _log.warning(
            "%s: %s (%s)",
            self.run.run_key,
            what,
            redact(str(error))[:300],
            extra={"event": event, "run_key": self.run.run_key, **fields},
        )

    def _read_back(
        self,
        write_id: str,
        lock_kept: bool,
        count: int,
        *,
        resend: bool = True,
        lock_written: bool = True,
    ) -> list[Version] | None:
        """After a commit of unknown outcome: the versions it produced if it landed (``None``
        for the ops whose versions are not read back), ``None`` if it did not (the run record
        is still at the version this owner last wrote: the same commit may be resent).
        ``lock_written``: the commit's second op is the lock's (False for :meth:`mark`)."""
        stored = self.store.get(self.run_key)
        if stored is not None and stored.data.get("write_id") == write_id:
            if not lock_written:
                return [stored.version, *([None] * (count - 1))]
            lock_version = None
            if lock_kept:
                lock = self.store.get(self.lock_key)
                if lock is None:
                    raise self._taken_over()
                lock_version = lock.version
            return [stored.version, lock_version, *([None] * (count - 2))]
        if resend and stored is not None and stored.version == self.run_version:
            return None
        if stored is not None and any(
            w.write_id == stored.data.get("write_id") for w in self._unsettled
        ):
            # an earlier write of ours landed, so this one cannot have: the refusal of its
            # resend is settled by the caller (:meth:`_settle_earlier`)
            return None
        if not resend:
            return None  # the caller raises the refusal it holds
        raise self._taken_over()

    def _taken_over(self, when: str = "") -> LeaseLost:
        lost = LeaseLost(
            f"lease on {self.run.run_key} was taken over{' ' + when if when else ''} "
            f"(fence {self.run.fence})"
        )
        self.interrupt(lost)
        return lost

    def expires_at(self) -> datetime:
        """When the lease runs out, as last written (computed before the commit: conservative)."""
        return self._expires


class LeaseKeeper:
    """Renews ``lease`` in the background until :meth:`stop` is called.

    ``max_runtime``: after this long the keeper interrupts the run with
    :class:`~cronwarden.model.errors.Cancelled` and stops renewing. ``on_renew`` is called after
    each renewal (e.g. to extend the queue delivery's visibility).

    No thread per keeper: :meth:`start` registers it with the process's renewal scheduler
    (:mod:`cronwarden.run.renewal`), which runs each due step on a worker thread. :meth:`stop`
    makes a renewal stuck retrying give up and returns once no renewal of this lease is in
    progress, so the run's last commit never races one. :meth:`is_alive` is True from
    :meth:`start` until the keeper stopped, or ended itself (lease lost, max runtime).
    """

    def __init__(
        self,
        lease: Lease,
        *,
        max_runtime: timedelta,
        interval: float,
        on_renew: Callable[[], None] | None = None,
        on_lost: Callable[[LeaseLost], None] | None = None,
    ) -> None:
        self.lease = lease
        self.max_runtime = max_runtime
        self.interval = max(0.05, interval)
        self.on_renew = on_renew
        self.on_lost = on_lost
        self.started_at = lease.clock()
        claimed = lease.run.started_at or self.started_at
        lease.deadline = claimed + max_runtime
        self._ticket: Ticket | None = None
        self._extended_at = time.monotonic()

    def start(self) -> None:
        if self._ticket is not None:
            raise RuntimeError("a lease keeper can be started only once")
        self._ticket = Ticket(self._step)
        scheduler().add(self._ticket, self._next_wait())

    def is_alive(self) -> bool:
        return self._ticket is not None and self._ticket.alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the keeper ended (stopped, lease lost, max runtime)."""
        if self._ticket is not None:
            self._ticket.done.wait(timeout)

    def stop(self) -> None:
        self.lease.quit_retrying.set()  # a renewal stuck retrying a failing store gives up
        if self._ticket is not None:
            scheduler().halt(self._ticket)
        self.lease.quit_retrying.clear()  # the run's last commit retries as usual

    def _step(self) -> float | None:
        """One wake-up: seconds until the next, or None when the keeper is done."""
        lease = self.lease
        now = lease.clock()
        if now - self.started_at > self.max_runtime:
            lease.interrupt(Cancelled(f"run exceeded its max runtime of {self.max_runtime}"))
            return None
        if now - lease.last_write < timedelta(seconds=self.interval):
            # A progress write renewed the lease; keep the delivery's visibility in step.
            self._extend_visibility()
            return self._next_wait()
        try:
            with lease.mutex:
                if self._halted():
                    return None
                lease.renew()
        except LeaseLost as exc:
            if self.on_lost:
                self.on_lost(exc)
            return None
        except Exception as exc:  # store unreachable: retry until the lease runs out
            if lease.clock() >= lease.expires_at() and not _settled(lease):
                lost = LeaseLost(f"lease expired while the store was unreachable: {exc}")
                lease.interrupt(lost)
                if self.on_lost:
                    self.on_lost(lost)
                return None
            return self._next_wait()
        self._extend_visibility(force=True)
        return self._next_wait()

    def _halted(self) -> bool:
        return self._ticket is not None and self._ticket.halted

    def _extend_visibility(self, *, force: bool = False) -> None:
        """Call ``on_renew`` after a renewal, and at least once per interval while progress
        writes keep the lease alive (else the delivery would reappear mid-run)."""
        if self.on_renew is None:
            return
        if not force and time.monotonic() - self._extended_at < self.interval:
            return
        self._extended_at = time.monotonic()
        with contextlib.suppress(Exception):  # visibility is best effort
            self.on_renew()

    def _next_wait(self) -> float:
        since = (self.lease.clock() - self.lease.last_write).total_seconds()
        return max(0.02, min(self.interval, self.interval - since))


def _settled(lease: Lease) -> bool:
    """Whether a renewal of unknown outcome turns out to have landed (the lease lasts longer
    than its owner knew); False when it did not or the store cannot tell yet."""
    try:
        return lease.settle_unknown()
    except StoreUnavailable:
        return False
