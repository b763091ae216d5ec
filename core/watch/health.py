"""What the watcher says about a job: the conditions it can raise (:class:`Condition`), one alert
(:class:`Alert`), everything it knows about one job (:class:`JobHealth`) and one check's report
(:class:`Report`).

These are the values every judge of the watch layer produces or reads (the watcher, the run
conditions, the consumers' health, the notifiers, the metrics); they live apart from the
:class:`~cronwarden.watch.watcher.Watcher` so that those judges and the watcher that calls them
import them without a cycle (``cronwarden.watch.watcher`` re-exports them).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..jobs.definitions import Job
from ..model.durations import format_duration
from ..model.records import StatusRecord, iso
from ..run.accounting import Accounting
from ..run.baseline import baseline_of
from .alerting.text import job_fields, job_suffix


class Condition(enum.StrEnum):
    MISSED = "missed"
    FAILING = "failing"
    STUCK = "stuck"
    SKIPPING = "skipping"
    DEAD_LETTERS = "dead_letters"
    SUSPICIOUS = "suspicious"  #: the newest success broke the job's expectations
    SLOW = "slow"  #: a run took (or takes) over ``slow_factor`` x the job's p50 baseline
    QUARANTINED = "quarantined"  #: ledger items quarantined, until `cronwarden ledger resolve`


@dataclass(frozen=True)
class Alert:
    job: str
    kind: Condition
    firing: bool  #: False for a recovery notice
    text: str
    last_success: datetime | None = None
    expected_next: datetime | None = None
    first_check: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "alert": self.kind.value,
            "state": "firing" if self.firing else "recovered",
            "last_success": self.last_success.isoformat() if self.last_success else None,
            "expected_next": self.expected_next.isoformat() if self.expected_next else None,
            "first_check": self.first_check,
            **self.extra,
        }


@dataclass
class JobHealth:
    """Everything the watcher knows about one job, for ``status`` and ``check``."""

    job: Job
    status: dict[str, Any]
    conditions: dict[Condition, Alert]
    last_success: datetime | None
    last_success_window: datetime | None
    expected_next: datetime
    #: the window accounting this check did (gaps, dead letters, states it read)
    accounting: Accounting = field(default_factory=Accounting)
    #: the job's grace: a window with no record is missed at window + grace (see
    #: :mod:`cronwarden.run.accounting` for running and failed windows)
    grace: timedelta | None = None
    #: a dependent job's upstreams whose latest run has not succeeded (``waits on a (failed)``)
    waiting_on: str = ""

    @property
    def threshold(self) -> str:
        """The ``missed`` rule for this job, in words (``status`` shows it)."""
        grace = format_duration(self.grace) if self.grace is not None else "?"
        return f"window + {grace} (+ while a live lease runs)"

    @property
    def healthy(self) -> bool:
        return not self.conditions

    @property
    def state_text(self) -> str:
        """The last run's state, and the pause / snooze in force, for ``status``."""
        from ..jobs.pause import pause_of, snooze_of

        text = str(self.status.get("status") or "-")
        pause, snooze = pause_of(self.status), snooze_of(self.status)
        if pause is not None:
            text += f"; {pause.describe()}"
        if snooze is not None and snooze.until is not None and snooze.active(datetime.now(UTC)):
            text += f"; alerts snoozed until {iso(snooze.until)}"
        if self.waiting_on:
            text += f"; {self.waiting_on}"
        from ..run.claiming import STATUS_MOVED, STATUS_MOVING_IN

        moved, moving_in = self.status.get(STATUS_MOVED), self.status.get(STATUS_MOVING_IN)
        if isinstance(moved, dict):  # ``cronwarden migrate``
            text = f"moved to {moved.get('to') or '?'} ({text})"
        elif isinstance(moving_in, dict):
            text += f"; moving in from {moving_in.get('from') or '?'}"
        return text

    @property
    def duration_text(self) -> str:
        """The last run's duration beside the p50 / p95 baseline, for ``status``."""
        return duration_text(self.job, self.status)


@dataclass
class Report:
    jobs: list[JobHealth]
    dlq_depth: int | None
    active: list[Alert]
    fired: list[Alert]
    recovered: list[Alert]
    #: the watcher's own status record as this check read it (heartbeat, queue-wide alerts)
    watcher_status: dict[str, Any] = field(default_factory=dict)
    #: jobs this check did not read: their status records were not due (nothing can have
    #: gone wrong since the watcher last judged them; ``jobs`` holds the ones it read)
    unread: int = 0

    @property
    def ok(self) -> bool:
        return not self.active


def _ms(value: float) -> str:
    if value < 10_000:
        return f"{value:.0f} ms"
    return format_duration(timedelta(milliseconds=value))


def duration_text(job: Job, status: dict[str, Any]) -> str:
    """``"61 ms (p50 100 ms / p95 120 ms over 20 runs)"``; ``-`` before the first run."""
    last = StatusRecord.from_data(status).duration_ms
    base = baseline_of(job, status)
    text = "-" if last is None else _ms(last)
    return f"{text} ({base.describe()})" if base is not None else text


def _about(job: Job, alert: Alert) -> Alert:
    """``alert`` with the job's owner, tags and description in its text and fields."""
    return dataclasses.replace(
        alert, text=alert.text + job_suffix(job), extra={**job_fields(job), **alert.extra}
    )
