"""Azure timer ticks → job windows, DST-correct without ``WEBSITE_TIME_ZONE``.

A job's timer fires on an NCRONTAB schedule **in UTC** that contains every UTC instant a local
fire time of the job can map to (:func:`cronwarden.adapters.azure.ncrontab.utc_ncrontab`): a
daily 02:00 Europe/Berlin job fires at 00:00 and 01:00 UTC. Only one of those is the real window
on any given day, so each tick asks the job's own schedule (in its own time zone):

* the tick this invocation stands for is the latest occurrence of the timer schedule at or
  before *now* (plus a few seconds of tolerance: the host may call a little early);
* the window is ``job.schedule.floor(tick)``;
* the tick **enqueues** only if that window came due after the previous occurrence of the timer
  schedule (``window > previous tick``): the first tick at or after a window enqueues it, every
  later tick before the next window is skipped (logged, nothing sent). This holds for any timer
  schedule at least as fine as the job's windows, and across DST changes, because both sides
  are computed, not assumed;
* a **past-due** tick (the host was down or busy) enqueues ``job.schedule.floor(now)``, the latest
  window that is due, whatever the previous tick was; the job's catch-up policy adds the
  windows missed in between (``Trigger.tick`` with the store); the run key dedupes the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwarden.jobs.definitions import Job
from cronwarden.model.errors import InvalidJobDefinition
from cronwarden.model.schedule import Schedule, utc

from .ncrontab import to_ncrontab, utc_ncrontab

TOLERANCE = timedelta(seconds=5)


@dataclass(frozen=True)
class TimerSchedule:
    """A 6-field NCRONTAB timer schedule (``second minute hour day month weekday``, UTC).

    Only a fixed second is accepted (windows are whole minutes). Restricting both day-of-month
    and day-of-week is refused: NCRONTAB requires both to match, cron (and this evaluator) either.
    """

    ncrontab: str
    second: int
    schedule: Schedule

    @classmethod
    def parse(cls, text: str) -> TimerSchedule:
        fields = text.split()
        if len(fields) != 6:
            raise InvalidJobDefinition(
                f"timer schedule {text!r}: expected 6 NCRONTAB fields "
                "(second minute hour day month weekday)"
            )
        if not fields[0].isdigit() or not 0 <= int(fields[0]) <= 59:
            raise InvalidJobDefinition(
                f"timer schedule {text!r}: the seconds field must be one number (e.g. 0); "
                "cronwarden windows are whole minutes"
            )
        if fields[3] != "*" and fields[5] != "*":
            raise InvalidJobDefinition(
                f"timer schedule {text!r} restricts both day-of-month and day-of-week, which "
                "NCRONTAB and cron read differently; restrict one of them"
            )
        return cls(text, int(fields[0]), Schedule(" ".join(fields[1:]), "UTC"))

    def latest(self, when: datetime) -> datetime:
        """The latest occurrence at or before ``when``."""
        offset = timedelta(seconds=self.second)
        return self.schedule.floor(utc(when) - offset) + offset

    def previous(self, occurrence: datetime) -> datetime:
        """The occurrence before ``occurrence``."""
        return self.latest(utc(occurrence) - timedelta(seconds=1))

    def next_after(self, when: datetime) -> datetime:
        offset = timedelta(seconds=self.second)
        return self.schedule.next_after(utc(when) - offset) + offset


def timer_schedule_for(job: Job, setting: str | None) -> TimerSchedule:
    """The timer of ``job``: the app setting when given, else its cron translated to UTC."""
    if setting and setting.strip():
        return TimerSchedule.parse(setting.strip())
    tz = job.schedule.timezone
    text = to_ncrontab(job.schedule.cron) if tz == "UTC" else utc_ncrontab(job.schedule.cron, tz)
    return TimerSchedule.parse(text)


def due_window(
    job: Job,
    timer: TimerSchedule,
    now: datetime,
    *,
    past_due: bool = False,
    tolerance: timedelta = TOLERANCE,
) -> datetime | None:
    """The window this tick must enqueue, or None when the tick is not the first to see it."""
    if past_due:
        return job.schedule.floor(now)
    tick = timer.latest(utc(now) + tolerance)
    window = job.schedule.floor(tick)
    return window if window > timer.previous(tick) else None


__all__ = ["TOLERANCE", "TimerSchedule", "due_window", "timer_schedule_for"]
