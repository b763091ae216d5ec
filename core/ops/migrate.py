"""Moving jobs and their state from one provider to another, live (``cronwarden migrate``).

Per job, in this order (each step idempotent, so a migration killed anywhere is finished by
running it again):

1. **Close the destination**: its job lock becomes a ``moving_in`` fence
   (:data:`~cronwarden.run.claiming.MOVED_OWNER`): a fire there waits (DEFERRED, no attempt
   used) until the state is in. Its status says ``moving_in`` (the watcher stays quiet).
2. **Fence the source**: one compare-and-set commit of its status (``moved`` mark) and its
   lock (a ``moved`` fence naming the destination). From then every claim on the source is
   refused with reason ``moved``, acknowledged, and a new window recorded as excused naming
   the destination. A run in flight holds the lock: the fence waits for its lease (up to
   ``wait``), then takes the lock over (the run is fenced out at its next write and taken over
   on the destination from its ledger).
3. **Copy**: the status (last success, counters, alert state, baselines, pause and snooze,
   window accounting checkpoint), run records within retention, ledger items, the outbox, and
   the watcher's own record (when the destination has none), as Create or, where the
   destination holds different data, Update against the version read (``copy_records``).
4. **Dead letters**: the source broker's letters of the job are recorded on the destination
   as dead-lettered windows (the source queue is drained only after every job is done).
5. **Forward**: unfinished windows (running without a live lease, failed) and windows the
   fence refused are published on the destination's queue; its claim takes them over (fence
   + 1, the ledger's done items are not run again) or finds them done.
6. **Open the destination**: one commit drops the ``moving_in`` fence (or hands the lock to the
   pause that moved with the job) and marks the status ``migrated_from``.
7. **Done**: the source's ``moved`` mark says ``done``; a re-run skips the job.

Before step 1 of any job, a destination that holds state of its own for a job (it ran the job
itself: :func:`own_state`) is refused with :class:`DestinationHasState`, nothing written:
copying over it would take the job back (an older last success, a dead-lettered window gone).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..jobs.definitions import Job, JobSet
from ..model.errors import CommitConflict, MalformedRunRequest
from ..model.ports import (
    ITEM,
    OUTBOX,
    RUN,
    STATUS,
    Create,
    DeadLetter,
    Delete,
    Key,
    Op,
    Queue,
    Record,
    Store,
    Update,
)
from ..model.records import (
    DEAD_LETTER_REASON,
    PAUSE_OWNER,
    LockRecord,
    RunRecord,
    iso,
    lock_key_of,
    parse_iso,
    run_key_of,
    status_key_of,
)
from ..model.runs import RunRequest, RunState, parse_window, request_attributes
from ..run.claiming import (
    MOVED_OWNER,
    MOVED_TO,
    MOVING_IN,
    STATUS_MIGRATED_FROM,
    STATUS_MOVED,
    STATUS_MOVING_IN,
)

#: the watcher's own status record (``cronwarden.watch.watcher.WATCHER_RECORD``)
WATCHER_RECORD = "_watcher"
#: status fields that belong to one side of a migration, never copied
SIDE_FIELDS = (STATUS_MOVED, STATUS_MOVING_IN, STATUS_MIGRATED_FROM)
PRIOR = "prior"  #: a fence lock's field: the pause lock it replaced (handed on when opening)
_FOREVER = timedelta(days=365 * 100)
_UNFINISHED = (RunState.RUNNING, RunState.FAILED)


class MigrationError(Exception):
    """A job cannot be moved as asked (one line naming the job and why)."""


class DestinationHasState(MigrationError):
    """The destination holds state of its own for jobs being moved (it ran them itself):
    copying the source's over it would take them back. Raised before anything is written;
    ``jobs`` names them."""

    def __init__(self, destination: str, held: Mapping[str, str]) -> None:
        self.jobs = sorted(held)
        listing = "; ".join(f"{name} ({held[name]})" for name in self.jobs)
        super().__init__(
            f"{destination} holds state of its own for {len(held)} job(s) being moved: "
            f"{listing}. Copying the source's over it would take it back (false missed "
            "alerts, lost dead-lettered windows); nothing was written. Move into a store that "
            "has not run these jobs (close it with --prepare before its schedulers and watcher "
            "start), or leave them out (--job)"
        )


@dataclass
class Side:
    """One provider of a migration: its store and queue, and the label shown in marks."""

    label: str
    store: Store
    queue: Queue


@dataclass
class JobResult:
    """What happened to one job (counts are of records written or found equal)."""

    job: str
    state: str = "moved"  #: moved | already moved | skipped
    copied: dict[str, int] = field(default_factory=dict)
    letters: int = 0
    forwarded: list[str] = field(default_factory=list)
    note: str = ""

    def line(self) -> str:
        counts = ", ".join(f"{kind} {n}" for kind, n in self.copied.items())
        extra = f"; {self.note}" if self.note else ""
        forwarded = f"; forwarded {len(self.forwarded)} window(s)" if self.forwarded else ""
        return (
            f"{self.job}: {self.state}"
            + (f" ({counts}; dead letters {self.letters}{forwarded})" if counts else "")
            + extra
        )


@dataclass
class Report:
    jobs: list[JobResult] = field(default_factory=list)
    letters_removed: int = 0
    problems: list[str] = field(default_factory=list)


def stripped(data: Mapping[str, Any]) -> dict[str, Any]:
    """A status's data without the fields of one side of a migration."""
    return {k: v for k, v in data.items() if k not in SIDE_FIELDS}


def movable_run(data: Mapping[str, Any], now: datetime) -> bool:
    """A run record that moves: within retention, and not a window a fence excused (the
    other side runs that one)."""
    if data.get("excused") == "moved":
        return False
    expires = parse_iso(data.get("expire_at"))
    return expires is None or expires > now


def movable_item(data: Mapping[str, Any], now: datetime) -> bool:
    expires = parse_iso(data.get("expire_at"))
    return expires is None or expires > now


def digest(records: Iterable[tuple[str, str, Mapping[str, Any]]]) -> str:
    """A checksum of ``(kind, id, data)`` triples, whatever their order."""
    h = hashlib.sha256()
    for kind, rid, data in sorted(
        (k, i, json.dumps(d, sort_keys=True, default=str)) for k, i, d in records
    ):
        h.update(f"{kind}\0{rid}\0{data}\n".encode())
    return h.hexdigest()[:16]


def letters_by_job(
    queue: Queue, jobs: Iterable[str]
) -> dict[str, list[tuple[DeadLetter, RunRequest]]]:
    """The source broker's dead letters of ``jobs``, parsed (a letter that is not a run request
    of one of them stays where it is)."""
    wanted = set(jobs)
    depth = queue.dlq_depth()
    found: dict[str, list[tuple[DeadLetter, RunRequest]]] = {}
    if depth <= 0:
        return found
    for letter in queue.dlq_peek(depth + 100):
        try:
            request = RunRequest.from_json(letter.body)
        except MalformedRunRequest:
            continue
        if request.job in wanted and request.slot is None:
            found.setdefault(request.job, []).append((letter, request))
    return found


class Migration:
    """Moves ``jobs`` from ``source`` to ``destination``; see the module doc.

    ``wait``: how long the fence waits for a run in flight before it takes its lock over;
    ``say``: where progress lines go."""

    def __init__(
        self,
        jobs: Sequence[Job],
        source: Side,
        destination: Side,
        *,
        wait: timedelta = timedelta(minutes=10),
        poll: float = 0.5,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        say: Callable[[str], None] = lambda _line: None,
    ) -> None:
        if source.label == destination.label:
            raise MigrationError(f"--from and --to are both {source.label!r}; nothing to move")
        self.jobs = list(jobs)
        self.source = source
        self.destination = destination
        self.wait = wait
        self.poll = poll
        self.clock = clock
        self.say = say

    # -- the whole run ------------------------------------------------------------------------
    def conflicts(self) -> dict[str, str]:
        """The jobs whose destination holds state of its own (see :func:`own_state`), each with
        what it holds; empty when every job can be moved (or was). Reads only."""
        found = {}
        for job in self.jobs:
            held = own_state(job.name, self.source, self.destination)
            if held:
                found[job.name] = held
        return found

    def _refuse_conflicts(self) -> None:
        found = self.conflicts()
        if found:
            raise DestinationHasState(self.destination.label, found)

    def prepare(self) -> None:
        """Step 1 alone for every job: close the destination before its schedulers and workers
        start, so that it runs nothing before the state is in. Raises
        :class:`DestinationHasState`, writing nothing, when the destination ran a job itself."""
        self._refuse_conflicts()
        for job in self.jobs:
            status = self.source.store.get(status_key_of(job.name))
            moved = _mark(status, STATUS_MOVED)
            if moved is not None and moved.get("done"):
                self.say(f"{job.name}: moved already")
                continue
            self._close_destination(job, str(moved.get("id")) if moved else uuid.uuid4().hex[:12])
            self.say(f"{job.name}: closed on {self.destination.label} until its state is in")

    def run(self) -> Report:
        """Steps 1-7 for every job, then the source's moved dead letters are removed. Raises
        :class:`DestinationHasState`, writing nothing, when the destination ran a job itself."""
        self._refuse_conflicts()
        report = Report()
        letters = letters_by_job(self.source.queue, (j.name for j in self.jobs))
        done: list[str] = []
        for job in self.jobs:
            try:
                result = self.move(job, letters.get(job.name, []))
            except MigrationError as exc:
                report.problems.append(str(exc))
                report.jobs.append(JobResult(job.name, "not moved", note=str(exc)))
                continue
            report.jobs.append(result)
            self.say(result.line())
            done.append(job.name)
        self._copy_watcher()
        ids = [letter.message_id for name in done for letter, _ in letters.get(name, [])]
        if ids:
            try:
                report.letters_removed = self.source.queue.dlq_remove(ids)
            except NotImplementedError as exc:
                report.problems.append(f"source dead-letter queue not drained: {exc}")
            else:
                self.say(f"source dead-letter queue: removed {report.letters_removed} letter(s)")
        return report

    def move(self, job: Job, letters: Sequence[tuple[DeadLetter, RunRequest]]) -> JobResult:
        """Steps 1-7 for one job (each skipped when a previous run of it did it)."""
        name = job.name
        src_status = self.source.store.get(status_key_of(name))
        moved = _mark(src_status, STATUS_MOVED)
        if moved is not None and moved.get("to") != self.destination.label:
            raise MigrationError(f"{name}: moved to {moved.get('to')!r} already, not here")
        migration = str(moved.get("id")) if moved else uuid.uuid4().hex[:12]
        dst_status = self.destination.store.get(status_key_of(name))
        opened = (_mark(dst_status, STATUS_MIGRATED_FROM) or {}).get("id") == migration
        if (moved is not None and moved.get("done")) or opened:
            count = self._record_letters(job, letters, opened=True)
            self._mark_done(name, migration)
            return JobResult(name, "already moved", letters=count)
        self._close_destination(job, migration)
        self._fence(job, migration)
        result = JobResult(name)
        result.copied = self.copy(job, migration)
        result.letters = self._record_letters(job, letters, opened=False)
        dead = {request.slot_text for _, request in letters}
        result.forwarded = self._forward(job, dead)
        self._open(job, migration)
        self._mark_done(name, migration)
        return result

    # -- 1. close the destination -------------------------------------------------------------
    def _close_destination(self, job: Job, migration: str) -> None:
        store, name = self.destination.store, job.name
        for _ in range(20):
            now = self.clock()
            lock = store.get(lock_key_of(name))
            if lock is not None and lock.data.get("owner") == MOVED_OWNER:
                if lock.data.get(MOVING_IN) == self.source.label:
                    return  # closed by an earlier run of this migration
            elif (
                lock is not None
                and LockRecord.from_data(lock.data).live(now)
                and lock.data.get("owner") != PAUSE_OWNER
            ):
                raise MigrationError(
                    f"{name}: a run holds the job's lock on {self.destination.label} (it "
                    "runs there already); stop it there before moving the state in"
                )
            fence = self._fence_lock(name, migration, now, moving_in=True)
            ops: list[Op] = [
                Create(lock_key_of(name), fence)
                if lock is None
                else Update(lock_key_of(name), fence, lock.version)
            ]
            status = store.get(status_key_of(name))
            mark = {"from": self.source.label, "id": migration, "at": iso(now)}
            data = {**(status.data if status else {}), STATUS_MOVING_IN: mark}
            ops.append(
                Create(status_key_of(name), data)
                if status is None
                else Update(status_key_of(name), data, status.version)
            )
            try:
                store.commit(ops)
            except CommitConflict:
                continue
            return
        raise MigrationError(f"{name}: the destination's lock kept changing; try again")

    # -- 2. fence the source ------------------------------------------------------------------
    def _fence(self, job: Job, migration: str) -> None:
        store, name = self.source.store, job.name
        deadline = time.monotonic() + self.wait.total_seconds()
        waited = False
        for _ in range(10_000):
            now = self.clock()
            lock = store.get(lock_key_of(name))
            status = store.get(status_key_of(name))
            fenced = (
                lock is not None
                and lock.data.get("owner") == MOVED_OWNER
                and lock.data.get(MOVED_TO) == self.destination.label
            )
            if fenced and _mark(status, STATUS_MOVED):
                return  # fenced by an earlier run of this migration
            prior: dict[str, Any] | None = None
            taken: list[Op] = []
            if lock is not None and lock.data.get("owner") != MOVED_OWNER:
                held = LockRecord.from_data(lock.data)
                running = not held.held_by_pause and held.live(now)
                if running and time.monotonic() < deadline:
                    if not waited:
                        self.say(f"{name}: waiting for the run in flight ({held.holder})")
                        waited = True
                    time.sleep(self.poll)  # a poll with a deadline: the lease ends or we take it
                    continue
                if running:  # waited long enough: the run is fenced out, the destination
                    taken = self._take_run(name, held.window)  # takes it over from its ledger
                if held.held_by_pause:
                    prior = dict(lock.data)
                elif held.paused(now) and held.pause is not None:
                    prior = LockRecord.for_pause(name, held.pause, now).to_data()
            elif lock is not None:
                prior = lock.data.get(PRIOR)
            fence = self._fence_lock(name, migration, now, moving_in=False, prior=prior)
            mark = {"to": self.destination.label, "id": migration, "at": iso(now), "done": False}
            data = {**stripped(status.data if status else {}), STATUS_MOVED: mark}
            ops: list[Op] = [
                Update(status_key_of(name), data, status.version)
                if status is not None
                else Create(status_key_of(name), data),
                Update(lock_key_of(name), fence, lock.version)
                if lock is not None
                else Create(lock_key_of(name), fence),
                *taken,
            ]
            try:
                store.commit(ops)
            except CommitConflict:
                continue  # a claim got in between: read again
            self.say(f"{name}: fenced on {self.source.label}")
            return
        raise MigrationError(f"{name}: the source's status kept changing; try again")

    def _take_run(self, name: str, window: str) -> list[Op]:
        """The op that takes a live run's record over (fence + 1, failed, no lease): its next
        fenced write or mark fails and its handler stops; the destination takes it over."""
        record = self.source.store.get(run_key_of(name, window)) if window else None
        if record is None:
            return []
        run = RunRecord.from_data(record.data)
        if run.state is not RunState.RUNNING:
            return []
        taken = run.with_(
            state=RunState.FAILED,
            owner=MOVED_OWNER,
            fence=run.fence + 1,
            lease_expires=None,
            finished_at=self.clock(),
            error=f"taken over by a migration to {self.destination.label}",
        )
        self.say(f"{name}: the run of {window} did not finish in time; taken over")
        return [Update(record.key, taken.to_data(), record.version)]

    def _fence_lock(
        self,
        name: str,
        migration: str,
        now: datetime,
        *,
        moving_in: bool,
        prior: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        data = LockRecord(
            owner=MOVED_OWNER,
            run_id=migration,
            run_key=f"{name}:{'moving_in' if moving_in else 'moved'}",
            window="",
            reason="moved",
            lease_expires=now + _FOREVER,
        ).to_data()
        if moving_in:
            data[MOVING_IN] = self.source.label
        else:
            data[MOVED_TO] = self.destination.label
        if prior is not None:
            data[PRIOR] = dict(prior)
        return data

    # -- 3. copy ------------------------------------------------------------------------------
    def copy(self, job: Job, migration: str) -> dict[str, int]:
        """Copy ``job``'s records; the counts of records the destination now holds as copied."""
        name, now = job.name, self.clock()
        src, dst = self.source.store, self.destination.store
        counts: dict[str, int] = {}
        for kind, keep in ((RUN, movable_run), (ITEM, movable_item), (OUTBOX, movable_item)):
            records = [r for r in src.query(kind, name) if keep(r.data, now)]
            counts[kind] = copy_records(dst, records, dst.query(kind, name))
        status = src.get(status_key_of(name))
        data = stripped(status.data if status else {})
        for _ in range(20):
            current = dst.get(status_key_of(name))
            mark = _mark(current, STATUS_MOVING_IN) or {
                "from": self.source.label,
                "id": migration,
                "at": iso(now),
            }
            wanted = {**data, STATUS_MOVING_IN: mark}
            try:
                dst.commit(
                    [
                        Update(status_key_of(name), wanted, current.version)
                        if current is not None
                        else Create(status_key_of(name), wanted)
                    ]
                )
            except CommitConflict:
                continue
            counts[STATUS] = 1 if data else 0  # the marks alone (the fence's own) move nothing
            return counts
        raise MigrationError(f"{name}: the destination's status kept changing; try again")

    def _copy_watcher(self) -> None:
        """The watcher's own record (queue-wide alert state), when the source has one and the
        destination none yet: a watcher already running there keeps what it knows."""
        src = self.source.store.get(Key(STATUS, WATCHER_RECORD))
        if src is None:
            return
        with contextlib.suppress(CommitConflict):
            self.destination.store.commit([Create(src.key, dict(src.data))])

    # -- 4. dead letters ----------------------------------------------------------------------
    def _record_letters(
        self, job: Job, letters: Sequence[tuple[DeadLetter, RunRequest]], *, opened: bool
    ) -> int:
        """Record each letter's window as dead-lettered on the destination: created when it
        has no run record there; an unfinished one (only before the destination opens) is
        marked dead-lettered. Returns how many windows the destination now holds for them."""
        store, now, count = self.destination.store, self.clock(), 0
        for letter, request in letters:
            key = run_key_of(job.name, request.slot_text)
            for _ in range(10):
                existing = store.get(key)
                if existing is None:
                    run = RunRecord(
                        job=job.name,
                        window=request.slot_text,
                        run_key=request.run_key,
                        state=RunState.DEAD_LETTERED,
                        attempt=letter.attempts,
                        finished_at=letter.dead_lettered_at or now,
                        payload=request.payload,
                        reason=request.reason,
                        error=letter.description or letter.reason,
                        extra={DEAD_LETTER_REASON: letter.reason or "MovedDeadLetter"},
                    )
                    op: Op = Create(key, run.to_data())
                else:
                    old = RunRecord.from_data(existing.data)
                    if opened or old.state not in _UNFINISHED:
                        break
                    run = old.with_(
                        state=RunState.DEAD_LETTERED,
                        lease_expires=None,
                        finished_at=letter.dead_lettered_at or now,
                        error=letter.description or old.error,
                        extra={**old.extra, DEAD_LETTER_REASON: letter.reason or "Moved"},
                    )
                    op = Update(key, run.to_data(), existing.version)
                try:
                    store.commit([op])
                except CommitConflict:
                    continue
                break
            count += 1
        return count

    # -- 5. forward ---------------------------------------------------------------------------
    def _forward(self, job: Job, dead: set[str]) -> list[str]:
        """Publish on the destination the windows the source left to it: unfinished runs and
        windows its fence refused (recorded there as excused ``moved``)."""
        now, out = self.clock(), []
        for record in self.source.store.query(RUN, job.name):
            run = RunRecord.from_data(record.data)
            refused = run.state is RunState.EXCUSED and run.excused == "moved"
            unfinished = run.state in _UNFINISHED and not run.lease_live(now)
            if not (refused or unfinished) or run.window in dead:
                continue
            try:
                window = parse_window(run.window)
            except ValueError:
                continue  # not a window (an event key): nothing to forward
            if job.schedule.floor(window) != window:
                continue
            if refused:
                there = self.destination.store.get(run_key_of(job.name, run.window))
                if there is not None and RunRecord.from_data(there.data).state.settled:
                    continue
            request = RunRequest(
                job=job.name,
                window=window,
                reason="catch_up" if run.reason == "catch_up" else "schedule",
                payload=dict(run.payload),
            )
            self.destination.queue.publish(
                request.to_json(),
                attributes=request_attributes(request),
                dedup_id=request.run_key,
            )
            out.append(run.window)
        return out

    # -- 6. open, 7. done ---------------------------------------------------------------------
    def _open(self, job: Job, migration: str) -> None:
        store, name = self.destination.store, job.name
        prior = self._prior_pause(name)
        for _ in range(20):
            now = self.clock()
            lock = store.get(lock_key_of(name))
            status = store.get(status_key_of(name))
            mark = {"from": self.source.label, "id": migration, "at": iso(now)}
            data = {**stripped(status.data if status else {}), STATUS_MIGRATED_FROM: mark}
            ops: list[Op] = [
                Update(status_key_of(name), data, status.version)
                if status is not None
                else Create(status_key_of(name), data)
            ]
            if lock is not None and lock.data.get("owner") == MOVED_OWNER:
                ops.append(
                    Update(lock_key_of(name), dict(prior), lock.version)
                    if prior is not None
                    else Delete(lock_key_of(name), lock.version)
                )
            elif lock is None and prior is not None:
                ops.append(Create(lock_key_of(name), dict(prior)))
            try:
                store.commit(ops)
            except CommitConflict:
                continue
            self.say(f"{name}: open on {self.destination.label}")
            return
        raise MigrationError(f"{name}: the destination's lock kept changing; try again")

    def _prior_pause(self, name: str) -> Mapping[str, Any] | None:
        """The pause lock the source's fence replaced (it moves with the job), if in force."""
        lock = self.source.store.get(lock_key_of(name))
        prior = None if lock is None else lock.data.get(PRIOR)
        if not isinstance(prior, Mapping):
            return None
        return prior if LockRecord.from_data(prior).paused(self.clock()) else None

    def _mark_done(self, name: str, migration: str) -> None:
        store = self.source.store
        for _ in range(20):
            status = store.get(status_key_of(name))
            mark = _mark(status, STATUS_MOVED)
            if status is None or mark is None or mark.get("done"):
                return
            data = {**status.data, STATUS_MOVED: {**mark, "done": True}}
            try:
                store.commit([Update(status_key_of(name), data, status.version)])
            except CommitConflict:
                continue
            return


def copy_records(store: Store, records: Sequence[Record], existing: Iterable[Record]) -> int:
    """Make ``store`` hold each of ``records`` (of one job): Create the absent, Update the
    different against the version read, leave the equal. Batched in commits of at most the
    store's op limit; a batch refused by a concurrent write is redone record by record."""
    there = {r.key: r for r in existing}
    ops: list[Op] = []
    for record in records:
        found = there.get(record.key)
        if found is None:
            ops.append(Create(record.key, dict(record.data)))
        elif found.data != record.data:
            ops.append(Update(record.key, dict(record.data), found.version))
    size = max(1, min(store.capabilities.max_commit_ops, 100))
    for start in range(0, len(ops), size):
        batch = ops[start : start + size]
        try:
            store.commit(batch)
        except CommitConflict:
            for op in batch:
                _put(store, op.key, op.data if isinstance(op, Create | Update) else {})
    return len(records)


def _put(store: Store, key: Key, data: Mapping[str, Any]) -> None:
    for _ in range(20):
        found = store.get(key)
        if found is not None and found.data == data:
            return
        try:
            store.commit([Create(key, data) if found is None else Update(key, data, found.version)])
        except CommitConflict:
            continue
        return
    raise MigrationError(f"{key.kind} {key.job}/{key.id} kept changing on the destination")


def already_moved(name: str, source: Side, destination: Side) -> bool:
    """Whether ``name`` moved already (the source's mark is done, or the destination opened
    for the source's migration): :meth:`Migration.move` copies nothing then."""
    moved = _mark(source.store.get(status_key_of(name)), STATUS_MOVED)
    if moved is None:
        return False
    came = _mark(destination.store.get(status_key_of(name)), STATUS_MIGRATED_FROM)
    return bool(moved.get("done")) or (came is not None and came.get("id") == moved.get("id"))


def own_state(name: str, source: Side, destination: Side) -> str | None:
    """What ``destination`` holds of job ``name`` that is its own (it ran the job itself), as
    one phrase; ``None`` when it holds nothing, or only what migrations write: closed for
    this source (``--prepare`` or an earlier run of this migration: its own fires waited),
    the job moved already, or it moved *away* from the destination (its state there is
    retired and the source's continues it: migrating back). Copying over own state would
    take the job back (an older last success, a dead-lettered window gone), so a migration
    refuses it. What its watcher wrote alone (a check of a job that never ran there, with
    its alert) is not its own state. Reads only."""
    status = destination.store.get(status_key_of(name))
    moving_in = _mark(status, STATUS_MOVING_IN)
    if moving_in is not None and moving_in.get("from") == source.label:
        return None
    gone = _mark(status, STATUS_MOVED)
    if (gone is not None and gone.get("done")) or already_moved(name, source, destination):
        return None
    held: list[str] = []
    data = stripped(status.data) if status is not None else {}
    state, success = data.get("status"), data.get("last_success_at")
    if state or success:  # a run's: the watcher's bookkeeping alone (a check that found the
        # job never ran, its alert) is no state of its own: the source's replaces it
        told = [f"state {state}"] if state else []
        told += [f"last success {success}"] if success else []
        held.append(", ".join(told))
    for kind in (RUN, ITEM, OUTBOX):
        count = len(destination.store.query(kind, name))
        if count:
            held.append(f"{count} {kind} record(s)")
    return ", ".join(held) or None


def _mark(record: Record | None, name: str) -> dict[str, Any] | None:
    value = None if record is None else record.data.get(name)
    return dict(value) if isinstance(value, Mapping) else None


@dataclass
class LeftBehind:
    """What stays on the source after a migration of ``moving``: jobs it holds state of that
    are not being moved (not in the job module, or not named with ``--job``), their dead
    letters, event dead letters (they do not move), and dead letters of no job at all;
    dead letters are counted while their windows are unaccounted on the source (not resolved
    or run again there). Retiring the source would lose them."""

    jobs: dict[str, int] = field(default_factory=dict)  #: job → its dead letters on the source
    events: dict[str, int] = field(default_factory=dict)  #: moved job → event dead letters
    unreadable_letters: int = 0  #: dead letters that are no run request of any job

    @property
    def letters(self) -> int:
        return sum(self.jobs.values()) + sum(self.events.values()) + self.unreadable_letters

    def lines(self, label: str) -> list[str]:
        out = [
            f"left on {label}: {name} (not among the jobs moved)"
            + (f"; {n} dead letter(s) of unaccounted windows stay on {label}" if n else "")
            for name, n in sorted(self.jobs.items())
        ]
        out += [
            f"left on {label}: {n} event dead letter(s) of {name} (event letters do not move)"
            for name, n in sorted(self.events.items())
        ]
        if self.unreadable_letters:
            out.append(
                f"left on {label}: {self.unreadable_letters} dead letter(s) that are no run "
                "request (`cronwarden dlq list` shows them)"
            )
        return out


def left_behind(source: Side, moving: Iterable[str]) -> LeftBehind:
    """The jobs and dead letters of ``source`` a migration of ``moving`` leaves where they are
    (a job already moved off the source by an earlier migration is not left behind)."""
    moving = set(moving)
    found = LeftBehind()
    for record in source.store.query(STATUS):
        name = record.key.job
        moved = _mark(record, STATUS_MOVED)
        if name == WATCHER_RECORD or name in moving or (moved and moved.get("done")):
            continue
        found.jobs[name] = 0
    depth = source.queue.dlq_depth()
    if depth > 0:
        for letter in source.queue.dlq_peek(depth + 100):
            try:
                request = RunRequest.from_json(letter.body)
            except MalformedRunRequest:
                found.unreadable_letters += 1
                continue
            name = request.job
            if name in moving and request.slot is None:
                continue  # it moves with its job
            if _accounted(source.store, request):
                continue  # its window was resolved (or re-run) there: losing it loses nothing
            tally = found.jobs if name not in moving else found.events
            tally[name] = tally.get(name, 0) + 1
    return found


def _accounted(store: Store, request: RunRequest) -> bool:
    """Whether the source's run record of ``request`` settled its window (a dead letter of a
    window resolved by hand or run again since)."""
    record = store.get(run_key_of(request.job, request.slot_text))
    return record is not None and RunRecord.from_data(record.data).state.settled


def scheduled_jobs(jobs: JobSet, names: Sequence[str]) -> list[Job]:
    """The jobs to move: those named (every job when none), refusing unknown names."""
    known = {j.name: j for j in jobs}
    if not names:
        return list(known.values())
    missing = [n for n in names if n not in known]
    if missing:
        raise MigrationError(f"unknown job(s) {', '.join(missing)}; known: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)]
