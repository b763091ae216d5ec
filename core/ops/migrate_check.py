"""What a migration would move (``--dry-run``) and whether it moved it (``--verify``).

Neither writes anything. ``verify`` compares, per job and record kind, the records the source
holds and the migration moves (:func:`~cronwarden.ops.migrate.movable_run`, ...) with the
destination's: a record is *equal* (same data: counted into the checksums on both sides),
*advanced* (the destination ran it on since: a takeover with a higher fence, a settled run of a
window the source left unfinished, a dead letter recorded there, an outbox entry delivered),
or a *difference*. It also checks the source's fence and that the destination is open.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..jobs.definitions import Job
from ..model.ports import ITEM, OUTBOX, RUN, Record
from ..model.records import RunRecord, lock_key_of, run_key_of, status_key_of
from ..model.runs import RunState
from ..run.claiming import MOVED_OWNER, MOVED_TO, STATUS_MIGRATED_FROM, STATUS_MOVED
from .migrate import (
    Side,
    already_moved,
    digest,
    letters_by_job,
    movable_item,
    movable_run,
    stripped,
)

_KINDS: tuple[tuple[str, Callable[[Mapping[str, Any], datetime], bool]], ...] = (
    (RUN, movable_run),
    (ITEM, movable_item),
    (OUTBOX, movable_item),
)


@dataclass
class JobCheck:
    job: str
    lines: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)


def plan(
    jobs: Sequence[Job], source: Side, destination: Side, *, now: datetime | None = None
) -> list[str]:
    """One line per job: what a migration would move, or that it moved it already (``now``:
    the time retention is judged at, default the real one). The counts are those
    :meth:`~cronwarden.ops.migrate.Migration.run` reports; a destination holding state of its
    own (:meth:`~cronwarden.ops.migrate.Migration.conflicts`) is refused before either."""
    now = now or datetime.now(UTC)
    letters = letters_by_job(source.queue, (j.name for j in jobs))
    lines = []
    for job in jobs:
        status = source.store.get(status_key_of(job.name))
        moved = None if status is None else status.data.get(STATUS_MOVED)
        if isinstance(moved, Mapping) and already_moved(job.name, source, destination):
            lines.append(f"{job.name}: moved to {moved.get('to')} already; nothing to do")
            continue
        counts = []
        forward = 0
        for kind, keep in _KINDS:
            records = [r for r in source.store.query(kind, job.name) if keep(r.data, now)]
            counts.append(f"{kind} {len(records)}")
        for record in source.store.query(RUN, job.name):
            run = RunRecord.from_data(record.data)
            if (run.state in (RunState.RUNNING, RunState.FAILED) and not run.lease_live(now)) or (
                run.excused == "moved"
            ):
                forward += 1
        pause = " (paused: the pause moves)" if status and status.data.get("pause") else ""
        moves_status = 1 if status and stripped(status.data) else 0
        lines.append(
            f"{job.name}: would move status {moves_status}, {', '.join(counts)}, "
            f"dead letters {len(letters.get(job.name, []))}, forward {forward} unfinished "
            f"window(s) to {destination.label}{pause}"
        )
    return lines


def verify(
    jobs: Sequence[Job], source: Side, destination: Side, *, now: datetime | None = None
) -> list[JobCheck]:
    """Per job: counts and checksums, and every difference found (empty: moved as claimed)."""
    now = now or datetime.now(UTC)
    letters = letters_by_job(source.queue, (j.name for j in jobs))
    checks = []
    for job in jobs:
        check = JobCheck(job.name)
        _check_marks(job, source, destination, check)
        for kind, keep in _KINDS:
            src = [r for r in source.store.query(kind, job.name) if keep(r.data, now)]
            dst = {r.key: r for r in destination.store.query(kind, job.name)}
            equal: list[Record] = []
            advanced = 0
            for record in src:
                there = dst.get(record.key)
                if there is not None and there.data == record.data:
                    equal.append(record)
                elif _advanced(kind, record, there):
                    advanced += 1
                else:
                    what = "missing" if there is None else "different"
                    check.differences.append(f"{kind} {record.key.id}: {what} on destination")
            theirs = [dst[r.key] for r in equal]
            mine_sum = digest((r.key.kind, r.key.id, r.data) for r in equal)
            their_sum = digest((r.key.kind, r.key.id, r.data) for r in theirs)
            check.lines.append(
                f"{kind}: {len(src)} on source, {len(equal)} equal, {advanced} advanced, "
                f"checksum {mine_sum} / {their_sum}"
            )
            if mine_sum != their_sum:  # pragma: no cover - equal data digests equally
                check.differences.append(f"{kind}: checksums differ")
        for _, request in letters.get(job.name, []):
            there = destination.store.get(run_key_of(job.name, request.slot_text))
            if there is None:
                check.differences.append(f"dead letter {request.run_key}: not on destination")
        checks.append(check)
    return checks


def _check_marks(job: Job, source: Side, destination: Side, check: JobCheck) -> None:
    lock = source.store.get(lock_key_of(job.name))
    if (
        lock is None
        or lock.data.get("owner") != MOVED_OWNER
        or lock.data.get(MOVED_TO) != destination.label
    ):
        check.differences.append(f"source not fenced (moved to {destination.label})")
    src_status = source.store.get(status_key_of(job.name))
    dst_status = destination.store.get(status_key_of(job.name))
    moved = None if src_status is None else src_status.data.get(STATUS_MOVED)
    came = None if dst_status is None else dst_status.data.get(STATUS_MIGRATED_FROM)
    if not isinstance(moved, Mapping) or not moved.get("done"):
        check.differences.append("source status not marked moved (done)")
    elif not isinstance(came, Mapping) or came.get("id") != moved.get("id"):
        check.differences.append("destination not open for this migration")
    else:
        check.lines.append(f"status: moved {moved.get('id')}, open on {destination.label}")


def _advanced(kind: str, mine: Record, there: Record | None) -> bool:
    """Whether the destination's record is a later state of ``mine`` (it ran on)."""
    if kind == OUTBOX:
        return there is None  # delivered and removed by the destination
    if there is None or kind != RUN:
        return False
    old, new = RunRecord.from_data(mine.data), RunRecord.from_data(there.data)
    if new.fence > old.fence:
        return True
    unfinished = old.state in (RunState.RUNNING, RunState.FAILED)
    return unfinished and new.state in (RunState.SUCCEEDED, RunState.DEAD_LETTERED)
