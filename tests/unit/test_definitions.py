"""Job declarations fail early and clearly; schedules are DST-correct."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import CatchUp, InvalidJobDefinition, Liveness, Retry, Schedule
from cronwarden.jobs.config import load_jobs
from cronwarden.model.durations import parse_duration


def noop(ctx: object) -> None:
    return None


def declare(**overrides: object) -> cronwarden.Job:
    options: dict[str, object] = {"cron": "0 2 * * *", "max_runtime": "10m"}
    options.update(overrides)
    name = str(options.pop("name", "nightly"))
    return cronwarden.job(name, **options)(noop)  # type: ignore[arg-type]


def test_a_valid_declaration_keeps_every_policy() -> None:
    job = declare(
        timezone="Europe/Berlin",
        overlap="defer",
        retry=Retry(7, "5s", "1m"),
        catch_up=CatchUp.oldest_first("2d", 2),
        liveness=Liveness(grace="30m", failure_threshold=2),
    )
    assert job.name == "nightly" and job.max_runtime == timedelta(minutes=10)
    assert job.overlap is cronwarden.Overlap.DEFER
    assert job.retry.max_attempts == 7 and job.retry.min_backoff == timedelta(seconds=5)
    assert job.catch_up.within == timedelta(days=2) and job.catch_up.max_per_tick == 2
    assert job.grace_at(datetime.now(UTC)) == timedelta(minutes=30)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"cron": "61 * * * *"}, "cron '61 \\* \\* \\* \\*'"),
        ({"cron": "* * * *"}, "expected 5 fields"),
        ({"cron": "0 0 0 * * *"}, "expected 5 fields"),
        ({"cron": "0 0 30 2 *"}, "Bad day-of-month"),
        ({"timezone": "Mars/Olympus"}, "not a known IANA timezone"),
        ({"timezone": "../../etc/passwd"}, "not a known IANA timezone"),
        ({"max_runtime": 0}, "max_runtime must be positive"),
        ({"max_runtime": "-5m"}, "cannot parse duration"),
        ({"max_runtime": "ten minutes"}, "cannot parse duration"),
        ({"overlap": "queue"}, "overlap must be one of skip, defer, fail"),
        ({"name": "Bad_Name"}, "job name 'Bad_Name'"),
        ({"name": ""}, "job name ''"),
    ],
)
def test_invalid_declarations_fail_with_a_clear_message(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidJobDefinition, match=message):
        declare(**overrides)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: Retry(0), "between 1 and 100"),
        (lambda: Retry(101), "between 1 and 100"),
        (lambda: Retry(True), "integer"),  # type: ignore[arg-type]
        (lambda: Retry(3, "10m", "1m"), "min_backoff <= max_backoff"),
        (lambda: CatchUp.oldest_first("0s"), "positive"),
        (lambda: CatchUp.oldest_first("1d", 0), "at least 1"),
        (lambda: Liveness(failure_threshold=0), "positive integer"),
        (lambda: Liveness(grace="-1h"), "cannot parse"),
    ],
)
def test_invalid_policies_fail_clearly(factory: object, message: str) -> None:
    with pytest.raises(InvalidJobDefinition, match=message):
        factory()  # type: ignore[operator]


def test_durations() -> None:
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration(" 2d ") == timedelta(days=2)
    assert parse_duration("250ms") == timedelta(milliseconds=250)
    assert parse_duration(90) == timedelta(seconds=90)
    with pytest.raises(InvalidJobDefinition):
        parse_duration("5 minutes")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def test_windows_are_dst_correct_in_spring() -> None:
    # Europe/Berlin skips 02:00-03:00 on 2026-03-29: the 02:30 run happens once, at 03:00 CEST.
    schedule = Schedule("30 2 * * *", "Europe/Berlin")
    windows = list(schedule.windows(utc("2026-03-28T00:00+00:00"), utc("2026-03-30T23:00+00:00")))
    assert windows == [
        utc("2026-03-28T02:30+01:00"),
        utc("2026-03-29T03:00+02:00"),
        utc("2026-03-30T02:30+02:00"),
    ]


def test_windows_are_dst_correct_in_autumn() -> None:
    # 02:30 happens twice on 2026-10-25 in Berlin; the job runs once.
    schedule = Schedule("30 2 * * *", "Europe/Berlin")
    windows = list(schedule.windows(utc("2026-10-24T12:00+00:00"), utc("2026-10-26T12:00+00:00")))
    assert len(windows) == 2
    assert windows[0] == utc("2026-10-25T02:30+02:00")
    hourly = list(
        Schedule("0 * * * *", "Europe/Berlin").windows(
            utc("2026-10-24T23:00+00:00"), utc("2026-10-25T03:00+00:00")
        )
    )
    assert len(hourly) == 5  # real elapsed hours, none doubled, none lost
    assert len(set(hourly)) == 5


def test_floor_maps_any_tick_to_its_window() -> None:
    schedule = Schedule("*/15 * * * *")
    assert schedule.floor(utc("2026-01-20T02:14:59.9+00:00")) == utc("2026-01-20T02:00+00:00")
    assert schedule.floor(utc("2026-01-20T02:15:00+00:00")) == utc("2026-01-20T02:15+00:00")
    assert schedule.next_after(utc("2026-01-20T02:15:00+00:00")) == utc("2026-01-20T02:30+00:00")
    assert schedule.interval_at(utc("2026-01-20T02:20+00:00")) == timedelta(minutes=15)
    with pytest.raises(ValueError, match="naive"):
        schedule.floor(datetime(2026, 1, 20))


SHADOWED = """
import cronwarden

@cronwarden.job("export", cron="*/5 * * * *", max_runtime="1m")
def handler(ctx):
    pass

@cronwarden.job("report", cron="*/5 * * * *", max_runtime="1m")
def handler(ctx):
    pass
"""

SHADOWED_CONSUMER = """
import cronwarden

@cronwarden.consumer("orders", key="id", max_runtime="1m")
def handle(event, ctx):
    pass

@cronwarden.consumer("refunds", key="id", max_runtime="1m")
def handle(event, ctx):
    pass
"""

FACTORY = """
import cronwarden

def make(name):
    @cronwarden.job(name, cron="*/5 * * * *", max_runtime="1m")
    def handler(ctx):
        pass
    return handler

a = make("a")
b = make("b")

@cronwarden.job("c", cron="*/5 * * * *", max_runtime="1m")
def c(ctx):
    pass

@cronwarden.job("c", cron="*/10 * * * *", max_runtime="1m")
def c(ctx):  # declared again under the same name: the later one counts, as before
    pass
"""


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (SHADOWED, "job 'export' is declared in .* the name 'handler'"),
        (SHADOWED_CONSUMER, "consumer 'orders' is declared in .* the name 'handle'"),
    ],
)
def test_a_job_whose_function_name_a_later_one_took_is_refused_not_lost(
    tmp_path: Path, source: str, message: str
) -> None:
    path = tmp_path / "shadowed_jobs.py"
    path.write_text(source)
    with pytest.raises(InvalidJobDefinition, match=message):
        load_jobs(str(path))


def test_jobs_made_by_a_factory_or_declared_again_load_as_before(tmp_path: Path) -> None:
    path = tmp_path / "factory_jobs.py"
    path.write_text(FACTORY)
    jobs = load_jobs(str(path))
    assert [j.name for j in jobs] == ["a", "b", "c"]
    assert jobs["c"].schedule.cron == "*/10 * * * *"


def test_jobset_finds_jobs_and_refuses_duplicate_names() -> None:
    import types

    module = types.ModuleType("m")
    module.a = declare(name="a")  # type: ignore[attr-defined]
    module.b = declare(name="b")  # type: ignore[attr-defined]
    module.other = 5  # type: ignore[attr-defined]
    jobs = cronwarden.JobSet.from_module(module)
    assert [j.name for j in jobs] == ["a", "b"]
    with pytest.raises(InvalidJobDefinition, match="two different jobs"):
        cronwarden.JobSet([declare(name="a"), declare(name="a")])
