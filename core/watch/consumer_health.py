"""Liveness of event consumers (:func:`cronwarden.consumer`): what the watcher checks for a job
that has no schedule.

* ``failing``: ``failure_threshold`` (3) consecutive failed runs, as for a job;
* ``dead_letters``: the consumer's dead-lettered events: messages in the dead-letter queue
  carrying its name (malformed events included: they never had a run record), or its
  latest run dead-lettered;
* ``stuck``: a run past its max runtime, as for a job;
* ``missed`` (only with ``at_least=(n, interval)``): fewer than ``n`` events were claimed in
  the interval since the watcher last saw the quota met. Counted from the status record's
  ``windows_recorded`` (one per new run key, in the claim's commit, on stores with atomic
  increments); on other stores, from the time of the latest claim (``n`` = 1 semantics).
  The alert stays until the quota is met again.

No store read beyond the watcher's one status query; the dead-letter queue is peeked (up to
:data:`DLQ_PEEK` messages) only when it is not empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..model.durations import format_duration
from ..model.logs import get_logger
from ..model.records import ACCOUNTED_BASE, ACCOUNTED_THROUGH_TS, StatusRecord
from ..model.redaction import redact
from ..run.accounting import Accounting

_log = get_logger("watcher")

if TYPE_CHECKING:
    from ..jobs.consumers import EventConsumer
    from ..jobs.definitions import JobSet
    from ..model.ports import Queue
    from .health import Alert, JobHealth

DLQ_PEEK = 100


def dead_lettered_events(queue: Queue | None, depth: int | None) -> dict[str, list[str]]:
    """Consumer name → reasons of its messages in the dead-letter queue (peeked, not taken)."""
    if queue is None or not depth:
        return {}
    found: dict[str, list[str]] = {}
    for letter in queue.dlq_peek(DLQ_PEEK):
        name = letter.attributes.get("consumer")
        if name:
            found.setdefault(name, []).append(letter.description or letter.reason)
    return found


def consumer_health(
    jobs: JobSet,
    statuses: Mapping[str, Mapping[str, Any]],
    now: datetime,
    dead: Mapping[str, list[str]],
) -> list[JobHealth]:
    """One :class:`~cronwarden.watch.watcher.JobHealth` per consumer of ``jobs`` (see the
    module)."""
    from .health import JobHealth

    health = []
    for name, declared in sorted(jobs.consumers.items()):
        job = jobs.consumer_job(name)
        assert job is not None
        status = dict(statuses.get(name, {}))
        record = StatusRecord.from_data(status)
        conditions, checkpoint = _conditions(declared, status, record, now, dead.get(name, []))
        from .health import _about

        health.append(
            JobHealth(
                job,
                status,
                {kind: _about(job, alert) for kind, alert in conditions.items()},
                record.last_success_at,
                None,
                now,
                Accounting(checkpoint=checkpoint),
                None,
            )
        )
    return health


def _conditions(
    declared: EventConsumer,
    status: Mapping[str, Any],
    record: StatusRecord,
    now: datetime,
    dead: list[str],
) -> tuple[dict[Any, Alert], tuple[datetime, int] | None]:
    from .health import Alert, Condition

    name = declared.name
    common: dict[str, Any] = {"last_success": record.last_success_at, "expected_next": None}
    conditions: dict[Any, Alert] = {}
    failures = record.consecutive_failures
    if failures >= 3:
        conditions[Condition.FAILING] = Alert(
            name,
            Condition.FAILING,
            True,
            f"{name} failing: {failures} consecutive failed events; last error: "
            f"{redact(record.error or '?')} ({status.get('run_key')}). First check: the error "
            "above, recent deploys, the producer's events.",
            first_check="last error",
            extra={"consecutive_failures": failures},
            **common,
        )
    if record.status == "dead_lettered" or dead:
        count = max(len(dead), 1)
        reason = dead[0] if dead else (record.error or "?")
        conditions[Condition.DEAD_LETTERS] = Alert(
            name,
            Condition.DEAD_LETTERS,
            True,
            f"{name}: {count} dead-lettered event(s); {redact(reason)}. First check: "
            "`cronwarden dlq list` for the reasons; fix the cause (or the producer), then "
            "`cronwarden dlq redrive`.",
            first_check="cronwarden dlq list",
            extra={"dead_lettered": count},
            **common,
        )
    started = record.started_at
    if record.status == "running" and started and now - started > declared.max_runtime:
        conditions[Condition.STUCK] = Alert(
            name,
            Condition.STUCK,
            True,
            f"{name} stuck: {status.get('run_key')} has been running for "
            f"{format_duration(now - started)}, over its max runtime of "
            f"{format_duration(declared.max_runtime)}.",
            first_check="worker logs for the run id",
            **common,
        )
    checkpoint = None
    if declared.at_least is not None:
        missed, checkpoint = _rate(declared, status, record, now)
        if missed:
            conditions[Condition.MISSED] = Alert(
                name,
                Condition.MISSED,
                True,
                f"{name} missed: {missed}; expected {declared.at_least}. First check: is the "
                "producer publishing (`cronwarden.publish`), and is a worker consuming the "
                "queue?",
                first_check="producer and worker",
                **common,
            )
    return conditions, checkpoint


def _rate(
    declared: EventConsumer, status: Mapping[str, Any], record: StatusRecord, now: datetime
) -> tuple[str, tuple[datetime, int] | None]:
    """(why the quota is missed or "", the checkpoint to write: (since, count at since))."""
    rate = declared.at_least
    assert rate is not None
    recorded = record.windows_recorded
    seen_since = status.get(ACCOUNTED_THROUGH_TS)
    first = record.first_seen_at or now
    if recorded is None:  # no counter on this store: the latest claim's time (n = 1)
        if rate.count > 1:
            _log.warning(
                "%s: at_least=%d per %s is checked as 'at least one event' on this store "
                "(it keeps no atomic counters)",
                declared.name,
                rate.count,
                format_duration(rate.per),
                extra={"event": "watcher.quota_weakened", "job": declared.name},
            )
        latest = record.started_at
        since = latest or first
        if now - since < rate.per:
            return "", None
        what = f"no event since {latest:%Y-%m-%dT%H:%M:%SZ}" if latest else "no event yet"
        return what, None
    if not isinstance(seen_since, int):
        return "", (now, recorded)
    since = datetime.fromtimestamp(seen_since, UTC)
    base = int(status.get(ACCOUNTED_BASE) or 0)
    seen = recorded - base
    if seen >= rate.count:
        return "", (now, recorded) if now - since >= rate.per else None
    if now - since < rate.per:
        return "", None
    return f"{seen} event(s) since {since:%Y-%m-%dT%H:%M:%SZ}", None
