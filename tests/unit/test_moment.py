"""The watcher's per-check schedule answers (:class:`cronwarden.run.accounting.Moment`) are exactly
the schedule's own, for every job that shares a schedule; a job's grace is its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

import cronwarden
from cronwarden import Liveness
from cronwarden.run.accounting import Moment

CRONS = ["*/5 * * * *", "0 * * * *", "30 2 * * *", "0 9 * * 1-5", "15 1 1 * *"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]


@settings(max_examples=60, deadline=None)
@given(
    cron=st.sampled_from(CRONS),
    zone=st.sampled_from(ZONES),
    now=st.datetimes(datetime(2025, 1, 1), datetime(2028, 1, 1), timezones=st.just(UTC)),
    horizon_days=st.integers(1, 40),
)
def test_moment_answers_are_the_schedules(
    cron: str, zone: str, now: datetime, horizon_days: int
) -> None:
    horizon = timedelta(days=horizon_days)
    plain = cronwarden.job("a", cron=cron, timezone=zone, max_runtime="1m")(lambda ctx: None)
    graced = cronwarden.job(
        "b", cron=cron, timezone=zone, max_runtime="1m", liveness=Liveness(grace="7m")
    )(lambda ctx: None)
    moment = Moment(now, horizon)
    for job in (plain, graced, plain):  # the second ask of a schedule comes from the cache
        schedule = job.schedule
        assert moment.latest(schedule) == schedule.floor(now)
        assert moment.next_after(schedule) == schedule.next_after(now)
        assert moment.horizon_start(schedule) == schedule.next_after(now - horizon)
        assert moment.grace(job) == job.grace_at(now)
        assert moment.answers(schedule) == (
            schedule.floor(now),
            schedule.next_after(now),
            schedule.interval_at(now),
            schedule.next_after(now - horizon),
        )
        through = schedule.floor(now - horizon / 2)
        assert moment.step(schedule, through) == schedule.next_after(through)
    assert moment.grace(graced) == timedelta(minutes=7)  # its own, not the shared interval
