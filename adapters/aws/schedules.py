"""EventBridge Scheduler ticks → job windows, DST-correct.

**How a job's time zone is rendered.** EventBridge Scheduler can evaluate a cron in a time zone
(``ScheduleExpressionTimezone``), but it *skips* a fire time that falls into a spring-forward
gap (a daily 02:30 Europe/Berlin job would not fire on the last Sunday of March), while
cronwarden's windows come from the job's own schedule in its zone, which has a window that day.
So each job's schedule is rendered **in UTC** as the union of every UTC instant a local fire time
can map to under the zone's offsets (the same expansion as the Azure timers:
:func:`cronwarden.deploy.ncrontab.utc_ncrontab`): a daily 02:00 Europe/Berlin job fires at 00:00
and 01:00 UTC. Each tick then asks the job's schedule which window it stands for and enqueues it
only if it is the first tick to see that window (:func:`due_window`), so exactly one tick per
window enqueues, across DST changes, and the windows are identical to the other providers'.

**The tick.** The schedule's target input carries ``<aws.scheduler.scheduled-time>``, which
EventBridge Scheduler replaces with the schedule's *scheduled* time (not the invocation time):
identical on the scheduler's own retries and on a double fire, so all of them map to one run
key (and the store's claim dedupes the copies).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cronwarden.jobs.definitions import Job
from cronwarden.model.errors import InvalidJobDefinition, MalformedRunRequest
from cronwarden.model.schedule import utc

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"  #: context attribute in the target input
TICK_VERSION = 1
_SECOND = timedelta(seconds=1)


class MalformedTick(MalformedRunRequest):
    """A scheduler event that names no known job or carries no scheduled time."""


@dataclass(frozen=True)
class Tick:
    job: str
    scheduled_time: datetime


def utc_cron_fields(job: Job) -> list[str]:
    """The job's schedule as five UTC cron fields (``minute hour dom month dow``, dow 0-6)
    firing at every UTC instant a local fire time maps to (see the module docstring)."""
    return _utc_fields(job.schedule.cron, job.schedule.timezone)


def _utc_fields(cron: str, tz: str) -> list[str]:
    from cronwarden.deploy.ncrontab import to_ncrontab, utc_ncrontab

    ncron = to_ncrontab(cron) if tz == "UTC" else utc_ncrontab(cron, tz)
    return ncron.split()[1:]


def aws_cron(job: Job) -> str:
    """``cron(minutes hours day-of-month month day-of-week year)`` for EventBridge Scheduler,
    in UTC. AWS numbers weekdays 1-7 from Sunday and needs ``?`` in one of the day fields."""
    return aws_cron_of(job.name, job.schedule.cron, job.schedule.timezone)


def aws_cron_of(name: str, cron: str, tz: str) -> str:
    """:func:`aws_cron` of job ``name`` scheduled ``cron`` in zone ``tz`` (a deployment plan's
    row); raises :class:`InvalidJobDefinition` naming the job when AWS cannot express it."""
    from cronwarden.deploy.ncrontab import expand_field

    minute, hour, dom, month, dow = _utc_fields(cron, tz)
    if dow == "*":
        dow_text = "?"
    else:
        if dom != "*":  # cron reads both restricted as OR; AWS cannot express it
            raise InvalidJobDefinition(
                f"job {name!r}: cron {cron!r} restricts both day-of-month and "
                "day-of-week; split it into two jobs (one per day field)"
            )
        dom = "?"
        days = sorted(expand_field(dow, 4) if dow != "*" else set(range(7)))
        dow_text = ",".join(str(day + 1) for day in days)
    return f"cron({minute} {hour} {dom} {month} {dow_text} *)"


def cron_of_aws(expression: str) -> str:
    """The five-field UTC cron an ``aws_cron`` expression stands for (for local schedule
    drivers and tests: it evaluates what was rendered, not what was meant)."""
    text = expression.strip()
    if not (text.startswith("cron(") and text.endswith(")")):
        raise ValueError(f"not an EventBridge cron expression: {expression!r}")
    minute, hour, dom, month, dow, year = text[5:-1].split()
    if year != "*":
        raise ValueError(f"{expression!r}: a year field other than * is not supported")
    if dow == "?":
        return f"{minute} {hour} {'*' if dom == '?' else dom} {month} *"
    days: list[int] = []
    for part in dow.split(","):
        low, _, high = part.partition("-")
        days.extend(range(int(low), int(high or low) + 1))
    return f"{minute} {hour} * {month} {','.join(str(d - 1) for d in days)}"


def tick_input(job: Job | str) -> str:
    """The schedule target's input: JSON naming the job (a :class:`Job` or its name) and
    carrying the scheduled time."""
    name = job if isinstance(job, str) else job.name
    return json.dumps(
        {"v": TICK_VERSION, "job": name, "scheduled_time": SCHEDULED_TIME},
        separators=(",", ":"),
    )


def parse_tick(event: Any) -> Tick:
    """A :class:`Tick` of the target input as the trigger receives it (a JSON object, already
    decoded by Lambda, or its text). Raises :class:`MalformedTick`."""
    if isinstance(event, str | bytes):
        try:
            event = json.loads(event)
        except ValueError as exc:
            raise MalformedTick(f"tick is not JSON: {exc}") from None
    if not isinstance(event, Mapping):
        raise MalformedTick("tick must be a JSON object")
    job, when = event.get("job"), event.get("scheduled_time")
    if not isinstance(job, str) or not job:
        raise MalformedTick('tick names no job ("job")')
    if not isinstance(when, str) or when == SCHEDULED_TIME:
        raise MalformedTick(f'tick for {job!r} carries no scheduled time ("scheduled_time")')
    try:
        scheduled = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedTick(f"tick for {job!r}: scheduled_time {when!r} is not ISO 8601") from None
    if scheduled.tzinfo is None:
        raise MalformedTick(f"tick for {job!r}: scheduled_time {when!r} has no UTC offset")
    return Tick(job, utc(scheduled))


def due_window(job: Job, scheduled_time: datetime) -> datetime | None:
    """The window the tick at ``scheduled_time`` must enqueue, or ``None`` when an earlier tick
    of the rendered UTC schedule already stood for that window (see the module docstring)."""
    from cronwarden.model.schedule import Schedule

    timer = Schedule(" ".join(utc_cron_fields(job)), "UTC")
    tick = timer.floor(scheduled_time)
    window = job.schedule.floor(tick)
    previous = timer.floor(tick - _SECOND)
    return window if window > previous else None


def schedule_name(prefix: str, job_name: str) -> str:
    """The EventBridge schedule's name (1-64 of ``[0-9a-zA-Z-_.]``)."""
    return f"{prefix}-{job_name}"[:64]


__all__ = [
    "SCHEDULED_TIME",
    "MalformedTick",
    "Tick",
    "aws_cron",
    "aws_cron_of",
    "cron_of_aws",
    "due_window",
    "parse_tick",
    "schedule_name",
    "tick_input",
    "utc_cron_fields",
]
