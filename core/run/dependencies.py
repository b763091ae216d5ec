"""Job dependencies: ``@cronwarden.job("report", after="export")`` runs ``report`` once for each
window ``export`` succeeds in, with run key ``report:<export's window>``, never by time.

How a completion becomes a run (see ``docs/events.md``):

1. **Outbox, in the upstream's completion commit.** When ``export`` succeeds, the engine adds
   one op per dependent to the commit that records the success (:func:`outbox_ops`): a record
   ``outbox export/<window>/report`` in ``export``'s partition (a commit is single-job on every
   store). No extra round trip; a failed or dead-lettered run writes none, so its dependents do
   not run.
2. **Publish after the commit.** The worker that ran ``export`` publishes ``report``'s request
   (:func:`publish_completion`, reason ``after:<upstream>``) once the commit returned.
3. **Sweep.** A crash (or a broker outage) between the commit and the publish leaves the
   outbox record: :class:`OutboxSweep` (run after every watcher check) publishes every record
   older than ``min_age`` whose dependent has no run record yet, and deletes those whose
   dependent has one. The run key makes a second publish harmless: the claim dedupes it.
4. **Fan-in gate.** A job after several upstreams runs when all of them succeeded in the
   window (:func:`waiting_on`, one read per other upstream before the claim); an earlier
   delivery is acknowledged as ``skipped`` (reason ``waiting_on``): the last upstream's own
   publish comes after its commit, so it sees every upstream succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..model.logs import get_logger
from ..model.ports import OUTBOX, RUN, Delete, Key, Merge, Op, Publisher, Record, Store
from ..model.records import RunRecord, iso, parse_iso, run_key_of
from ..model.redaction import redact
from ..model.runs import RunRequest, RunState, parse_window, request_attributes

if TYPE_CHECKING:
    from ..jobs.definitions import Job, JobSet
    from ..watch.watcher import Report, Watcher
    from .accounting import WindowState

log = get_logger("dependencies")

#: the ``reason`` of a request published by an upstream's completion: ``after:<upstream>``.
#: The sender rides in the reason, not the payload: every request of a dependent's run key
#: carries the same (empty) payload, whichever upstream or operator sent it, so no copy is
#: ever refused as a different payload
REASON = "after"
#: how old an outbox record must be before the sweep republishes it (the normal publish
#: follows the commit within a second; the sweep must not race it)
SWEEP_AGE = timedelta(minutes=2)


def outbox_key(upstream: str, window_text: str, dependent: str) -> Key:
    return Key(OUTBOX, upstream, f"{window_text}/{dependent}")


def outbox_ops(jobs: JobSet, job: Job, window_text: str, now: datetime) -> list[Op]:
    """The outbox records ``job``'s success in ``window_text`` writes in its completion commit,
    one per dependent (none for a job without dependents). A Merge, not a Create: a re-run of a
    succeeded window (an operator's) must not fail its completion on a leftover record."""
    return [
        Merge(
            outbox_key(job.name, window_text, dependent.name),
            {"job": dependent.name, "window": window_text, "upstream": job.name, "at": iso(now)},
        )
        for dependent in jobs.dependents_of(job.name)
    ]


def dependent_request(dependent: str, upstream: str, window: datetime) -> RunRequest:
    return RunRequest(dependent, window, reason=f"{REASON}:{upstream}")


def sender_of(request: RunRequest) -> str | None:
    """The upstream whose completion sent ``request`` (None for a manual run, a backfill)."""
    kind, _, upstream = request.reason.partition(":")
    return upstream if kind == REASON and upstream else None


def dedup_id(request: RunRequest, upstream: str) -> str:
    """Per upstream: a broker that deduplicates must not drop the last upstream's wake-up of a
    fan-in job as a copy of the first's."""
    return f"{request.run_key}@{upstream}"


def publish_completion(publisher: Publisher, jobs: JobSet, job: Job, window: datetime) -> int:
    """Publish a run request for every dependent of ``job`` for ``window`` (after its
    completion commit). Returns how many were published; a failure is logged and left to the
    sweep (the outbox records are in the store), never raised: the upstream's run succeeded."""
    published = 0
    for dependent in jobs.dependents_of(job.name):
        request = dependent_request(dependent.name, job.name, window)
        try:
            _publish(publisher, request, job.name)
            published += 1
        except Exception as exc:
            log.error(
                "%s: could not publish %s after %s's success: %s; the outbox sweep publishes it",
                dependent.name,
                request.run_key,
                job.name,
                redact(f"{type(exc).__name__}: {exc}"),
                extra={
                    "event": "dependency.publish_failed",
                    "job": dependent.name,
                    "run_key": request.run_key,
                    "upstream": job.name,
                },
            )
    return published


def _publish(
    publisher: Publisher, request: RunRequest, upstream: str, *, swept: bool = False
) -> None:
    publisher.publish(
        request.to_json(),
        attributes={**request_attributes(request), "after": upstream},
        dedup_id=dedup_id(request, upstream),
    )
    log.info(
        "%s: enqueued %s after %s succeeded%s",
        request.job,
        request.run_key,
        upstream,
        " (outbox sweep)" if swept else "",
        extra={
            "event": "dependency.swept" if swept else "dependency.published",
            "job": request.job,
            "run_key": request.run_key,
            "upstream": upstream,
        },
    )


def waiting_on(store: Store, job: Job, window_text: str, known: Iterable[str] = ()) -> list[str]:
    """The upstreams of ``job`` that have not succeeded in ``window_text``, each as
    ``name (state)``; ``known`` upstreams are taken as succeeded (the one whose completion
    sent the request). One read per other upstream."""
    waiting = []
    skip = set(known)
    for upstream in job.after:
        if upstream in skip:
            continue
        record = store.get(run_key_of(upstream, window_text))
        state = None if record is None else RunRecord.from_data(record.data).state
        if state is not RunState.SUCCEEDED:
            waiting.append(f"{upstream} ({state.value if state else 'not run'})")
    return waiting


def gate(store: Store, job: Job, request: RunRequest) -> str | None:
    """Why ``request`` of dependent ``job`` must not run yet (``waits on c (failed)``), or
    None. A request sent by the completion of the only upstream needs no read."""
    if not job.after:
        return None
    sender = sender_of(request)
    known = [sender] if sender in job.after else []
    if len(known) == len(job.after):
        return None
    waiting = waiting_on(store, job, request.slot_text, known)
    return f"waits on {', '.join(waiting)}" if waiting else None


class OutboxSweep:
    """A watcher hook: publish the completion events a crash left in the outbox.

    For each job with dependents, one query of its outbox records; a record older than
    ``min_age`` whose dependent has a run record is deleted, one whose dependent has none is
    published again (when every upstream succeeded in the window; else the last upstream's
    completion publishes it). One read per leftover record."""

    def __init__(
        self,
        jobs: JobSet,
        publisher: Callable[[], Publisher] | Publisher,
        *,
        min_age: timedelta = SWEEP_AGE,
    ) -> None:
        self.jobs = jobs
        self._publisher = publisher
        self.min_age = min_age
        self.published = 0
        self.deleted = 0

    @property
    def publisher(self) -> Publisher:
        return self._publisher if isinstance(self._publisher, Publisher) else self._publisher()

    def after_check(
        self, watcher: Watcher, report: Report | None, error: BaseException | None
    ) -> None:
        self.sweep(watcher.store, watcher.clock())

    def sweep(self, store: Store, now: datetime) -> int:
        """One pass; returns how many requests it published."""
        published = 0
        for upstream in self.jobs:
            if not self.jobs.dependents_of(upstream.name):
                continue
            for record in store.query(OUTBOX, upstream.name):
                published += self._one(store, record, now)
        self.published += published
        return published

    def _one(self, store: Store, record: Record, now: datetime) -> int:
        data = record.data
        at = parse_iso(data.get("at"))
        if at is not None and now - at < self.min_age:
            return 0
        dependent = self.jobs.get(str(data.get("job")))
        window_text = str(data.get("window"))
        if dependent is None:  # the dependent was removed from the job module
            store.commit([Delete(record.key, record.version)])
            self.deleted += 1
            return 0
        if store.get(run_key_of(dependent.name, window_text)) is not None:
            store.commit([Delete(record.key, record.version)])
            self.deleted += 1
            return 0
        upstream = record.key.job
        if waiting_on(store, dependent, window_text, [upstream]):
            return 0  # the last upstream to succeed publishes it
        request = dependent_request(dependent.name, upstream, parse_window(window_text))
        _publish(self.publisher, request, upstream, swept=True)
        return 1


def due_gaps(
    store: Store, jobs: JobSet, job: Job, gaps: Sequence[WindowState], now: datetime
) -> list[WindowState]:
    """The unaccounted windows of dependent ``job`` that are ``missed``: every upstream
    succeeded in the window and the last of them did more than ``job``'s grace ago. A window an
    upstream has not succeeded in is not missed: ``job`` waits on it (``status`` says so) and
    the upstream's own alerts fire. One query per upstream, only when there are gaps."""
    if not job.after or not gaps:
        return list(gaps)
    first = gaps[0].window_text
    last = gaps[-1].window_text + "~"
    finished: dict[str, list[datetime | None]] = {}
    for upstream in job.after:
        for record in store.query(RUN, upstream, start=first, end=last):
            run = RunRecord.from_data(record.data)
            if run.state is RunState.SUCCEEDED:
                finished.setdefault(record.key.id, []).append(run.finished_at)
    due = []
    for gap in gaps:
        times = finished.get(gap.window_text, [])
        if len(times) < len(job.after):
            continue
        done = max((t for t in times if t is not None), default=gap.window)
        if now - done >= job.grace_at(gap.window):
            due.append(gap)
    return due


def waits_text(jobs: JobSet, job: Job, statuses: Mapping[str, Mapping[str, Any]]) -> str:
    """``waits on a (dead_lettered)`` for ``status`` when an upstream's latest run has not
    succeeded (or it never ran), else ``""``."""
    waiting = []
    for upstream in job.after:
        state = statuses.get(upstream, {}).get("status")
        if state != RunState.SUCCEEDED.value:
            waiting.append(f"{upstream} ({state or 'never run'})")
    return f"waits on {', '.join(waiting)}" if waiting else ""


__all__ = [
    "REASON",
    "SWEEP_AGE",
    "OutboxSweep",
    "dedup_id",
    "dependent_request",
    "due_gaps",
    "gate",
    "outbox_key",
    "outbox_ops",
    "publish_completion",
    "waiting_on",
    "waits_text",
]
