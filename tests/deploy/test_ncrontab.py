"""NCRONTAB translation: equivalent when it can be, refused (one clear sentence) otherwise."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwarden.deploy.ncrontab import (
    compress,
    expand_field,
    to_ncrontab,
    utc_ncrontab,
    zone_offsets,
)
from cronwarden.model.errors import InvalidJobDefinition

START = datetime(2026, 1, 1, tzinfo=UTC)


def matcher(expr: str) -> Callable[[datetime], bool]:
    """NCRONTAB semantics (every field must match: AND), at second 0."""
    second, *fields = expr.split()
    assert second == "0"
    sets = [expand_field(text, i) for i, text in enumerate(fields)]

    def matches(when: datetime) -> bool:
        weekday = (when.weekday() + 1) % 7  # Monday=1 .. Sunday=0
        values = [when.minute, when.hour, when.day, when.month, weekday]
        return when.second == 0 and all(v in s for v, s in zip(values, sets, strict=True))

    return matches


def cron_times(cron: str, tz: str, days: int) -> list[datetime]:
    zone = ZoneInfo(tz)
    end = START + timedelta(days=days)
    out = []
    for local in CronSim(cron, (START - timedelta(seconds=1)).astimezone(zone)):
        when = local.astimezone(UTC)
        if when > end:
            return out
        out.append(when)
    return out


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("*/15 * * * *", "0 */15 * * * *"),
        ("0 2 * * *", "0 0 2 * * *"),
        ("0 2 * * MON-FRI", "0 0 2 * * 1-5"),
        ("30 9 * JAN,JUL *", "0 30 9 * 1,7 *"),
        ("0 0 * * 7", "0 0 0 * * 0"),
        ("5 4 1 * *", "0 5 4 1 * *"),
        ("0 8-18/2 * * *", "0 0 8,10,12,14,16,18 * * *"),
        ("0,1,2,3 * * * *", "0 0-3 * * * *"),
    ],
)
def test_to_ncrontab_translates(cron: str, expected: str) -> None:
    assert to_ncrontab(cron) == expected


@pytest.mark.parametrize(
    ("cron", "words"),
    [
        ("0 0 1 * 1", "restricts both day-of-month and day-of-week"),
        ("0 0 1,15 * MON", "split it into two jobs"),
        ("0 0 L * *", "'L' has no NCRONTAB"),
        ("0 0 * * 1#2", "'#' has no NCRONTAB"),
        ("0 0 15W * *", "'W' has no NCRONTAB"),
        ("0 0 * * ?", "'?' has no NCRONTAB"),
        ("0 0 * *", "expected 5 fields"),
        ("61 * * * *", "out of range"),
        ("x * * * *", "not a valid minute"),
    ],
)
def test_to_ncrontab_refuses(cron: str, words: str) -> None:
    with pytest.raises(InvalidJobDefinition, match=words.replace("(", r"\(")):
        to_ncrontab(cron)


@pytest.mark.parametrize(
    "cron",
    ["*/15 * * * *", "0 2 * * *", "0 2 * * MON-FRI", "30 9 1 * *", "0 0 * 2 *", "0 12 * * 0"],
)
def test_to_ncrontab_is_equivalent(cron: str) -> None:
    """Same fire times as cron (cronsim, the engine's own dialect) over 60 days, in UTC."""
    expected = cron_times(cron, "UTC", 60)
    matches = matcher(to_ncrontab(cron))
    minutes = (START + timedelta(minutes=m) for m in range(60 * 24 * 60 + 1))
    actual = [when for when in minutes if matches(when)]
    assert actual == expected


@pytest.mark.parametrize(
    ("cron", "tz", "expected"),
    [
        ("0 2 * * *", "Europe/Berlin", "0 0 0,1 * * *"),
        ("*/15 * * * *", "Europe/Berlin", "0 */15 * * * *"),
        ("0 9 * * *", "America/New_York", "0 0 13,14 * * *"),
        ("0 2 * * *", "Asia/Kolkata", "0 30 20 * * *"),
        ("0 1 * * 1", "Europe/Berlin", "0 0 0,23 * * 0,1"),
        ("0 12 1 * *", "Europe/Berlin", "0 0 10,11 1 * *"),
        ("0 2 * * *", "UTC", "0 0 2 * * *"),
    ],
)
def test_utc_ncrontab(cron: str, tz: str, expected: str) -> None:
    assert utc_ncrontab(cron, tz, start=START) == expected


def test_utc_ncrontab_refuses_day_of_month_crossing_midnight() -> None:
    with pytest.raises(InvalidJobDefinition, match="cross midnight in UTC"):
        utc_ncrontab("0 0 1 * *", "Europe/Berlin", start=START)


@pytest.mark.parametrize(
    ("cron", "tz"),
    [
        ("0 2 * * *", "Europe/Berlin"),
        ("30 1 * * 1-5", "Europe/Berlin"),
        ("0 9 * * *", "America/New_York"),
        ("0 1 * * 1", "Europe/Berlin"),
        ("*/20 * * * *", "Asia/Kathmandu"),
        ("0 2 * * *", "Australia/Lord_Howe"),
    ],
)
def test_utc_ncrontab_covers_every_local_fire_time(cron: str, tz: str) -> None:
    """Across a year with two DST changes, every window's UTC instant (except a window whose
    local time is skipped by spring-forward, which the next tick catches up) is a timer tick."""
    expr = utc_ncrontab(cron, tz, start=START)
    matches = matcher(expr)
    zone = ZoneInfo(tz)
    for when in cron_times(cron, tz, 366):
        local = when.astimezone(zone)
        skipped = local.replace(tzinfo=None) != _wall(cron, local)
        assert matches(when) or skipped, (expr, when)


def _wall(cron: str, local: datetime) -> datetime:
    """The wall-clock time cron asked for on that day (differs only inside a DST gap)."""
    minute, hour = cron.split()[:2]
    if minute.isdigit() and hour.isdigit():
        return local.replace(tzinfo=None, hour=int(hour), minute=int(minute))
    return local.replace(tzinfo=None)


def test_zone_offsets() -> None:
    assert zone_offsets("Europe/Berlin", START) == [60, 120]
    assert zone_offsets("UTC", START) == [0]
    with pytest.raises(InvalidJobDefinition, match="not a known IANA timezone"):
        zone_offsets("Mars/Olympus", START)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(0, 59), min_size=1))
def test_compress_round_trips(values: set[int]) -> None:
    assert expand_field(compress(values, 0, 59), 0) == values
