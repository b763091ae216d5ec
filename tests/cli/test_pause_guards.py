"""``pause`` / ``snooze`` never silently replace the one in force (refused, exit 2, naming it,
unless ``--replace``), ``unsnooze`` of a job not snoozed says so (as ``resume`` of a job not
paused does), an ``--until`` out of range is one clear line (exit 2), and ``status`` shows the
pause of a job that never ran."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronwarden.adapters.local import LocalProvider
from cronwarden.jobs.pause import (
    AlreadyPaused,
    AlreadySnoozed,
    excused,
    pause,
    pause_of,
    snooze,
    unsnooze,
)
from cronwarden.model.records import status_key_of

from .conftest import write_jobs

HOUR = timedelta(hours=1)
T0 = datetime(2026, 1, 20, 10, 0, 5, tzinfo=UTC)


@pytest.fixture
def jobs(tmp_path: Path) -> list[str]:
    module = write_jobs(
        tmp_path / "m.py",
        "@cronwarden.job('hourly', cron='0 * * * *', max_runtime='1m')\ndef hourly(ctx): pass\n",
    )
    return ["--jobs", module]


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    made = LocalProvider(str(tmp_path / "api.db"))
    yield made
    made.close()


def test_a_second_pause_is_refused_naming_the_pause_in_force(cw, jobs: list[str]) -> None:
    first = cw("pause", *jobs, "hourly", "--reason", "do not run until I say", "--by", "ana")
    assert first.code == 0, first
    second = cw("pause", *jobs, "hourly", "--reason", "short", "--until", "1h", "--by", "bo")
    assert second.code == 2, second
    assert "hourly is already paused by ana" in second.err, second
    assert "until resumed: do not run until I say" in second.err and "--replace" in second.err
    resumed = cw("resume", *jobs, "hourly")
    assert resumed.code == 0 and "do not run until I say" in resumed.out, resumed
    assert "until" not in resumed.out.split(": ", 1)[0], resumed  # still open-ended


def test_replace_makes_the_second_pause_explicit(cw, jobs: list[str]) -> None:
    assert cw("pause", *jobs, "hourly", "--reason", "long freeze").code == 0
    replaced = cw("pause", *jobs, "hourly", "--reason", "short", "--until", "1h", "--replace")
    assert replaced.code == 0, replaced
    resumed = cw("resume", *jobs, "hourly")
    assert resumed.code == 0 and ": short" in resumed.out and " until " in resumed.out, resumed


def test_a_second_snooze_is_refused_unless_replace(cw, jobs: list[str]) -> None:
    first = cw("snooze", *jobs, "hourly", "--until", "8h", "--reason", "deploy", "--by", "ana")
    assert first.code == 0, first
    second = cw("snooze", *jobs, "hourly", "--until", "1h")
    assert second.code == 2, second
    assert "hourly's alerts are already snoozed by ana" in second.err, second
    assert ": deploy" in second.err and "--replace" in second.err, second
    replaced = cw("snooze", *jobs, "hourly", "--until", "1h", "--replace")
    assert replaced.code == 0, replaced


def test_unsnooze_of_a_job_not_snoozed_says_so_like_resume(cw, jobs: list[str]) -> None:
    resumed = cw("resume", *jobs, "hourly")
    unsnoozed = cw("unsnooze", *jobs, "hourly")
    assert (resumed.code, resumed.out) == (0, "hourly was not paused"), resumed
    assert (unsnoozed.code, unsnoozed.out) == (0, "hourly was not snoozed"), unsnoozed
    assert cw("snooze", *jobs, "hourly", "--until", "2h", "--by", "ana").code == 0
    ended = cw("unsnooze", *jobs, "hourly")
    assert ended.code == 0 and ended.out.startswith("hourly: snooze ended (was snoozed by ana")
    again = cw("unsnooze", *jobs, "hourly")
    assert (again.code, again.out) == (0, "hourly was not snoozed"), again


@pytest.mark.parametrize("command", ["pause", "snooze"])
@pytest.mark.parametrize("until", ["99999999d", "99999999999999999999s", "9999-12-31"])
def test_an_until_out_of_range_is_one_clear_line(
    cw, jobs: list[str], command: str, until: str
) -> None:
    result = cw(command, *jobs, "hourly", "--reason", "x", "--until", until)
    assert result.code == 2, result
    assert result.err.startswith("error: --until") and "Error" not in result.err, result


@pytest.mark.parametrize("command", ["pause", "snooze"])
def test_an_until_in_the_past_is_refused(cw, jobs: list[str], command: str) -> None:
    result = cw(command, *jobs, "hourly", "--reason", "x", "--until", "2020-01-01")
    assert result.code == 2, result
    assert result.err.startswith("error: --until 2020-01-01") and "future" in result.err, result


def test_status_shows_the_pause_of_a_job_that_never_ran(cw, jobs: list[str]) -> None:
    assert cw("pause", *jobs, "hourly", "--reason", "vendor outage", "--by", "ana").code == 0
    shown = cw("status", *jobs, "-o", "json")
    assert shown.code == 0, shown
    (row,) = [json.loads(line) for line in shown.stdout.splitlines() if '"job"' in line]
    assert row["state"].startswith("never run; paused by ana"), row
    assert row["state"].endswith(": vendor outage"), row


def test_the_api_still_replaces_by_default_and_keeps_the_old_pause_excused(
    provider: LocalProvider,
) -> None:
    """The dashboard's pause action calls ``pause`` without ``replace``: unchanged."""
    store = provider.store()
    pause(store, "hourly", reason="first", by="ana", now=T0)
    second = pause(store, "hourly", reason="second", by="bo", now=T0 + HOUR, until=T0 + 3 * HOUR)
    record = store.get(status_key_of("hourly"))
    assert record is not None
    assert pause_of(record.data) == second
    assert excused(record.data, T0 + HOUR / 2, T0 + 2 * HOUR)  # fell due in the first pause
    assert record.data["pause_log"][-1]["replaced"]


def test_the_api_refuses_when_told_not_to_replace(provider: LocalProvider) -> None:
    store = provider.store()
    first = pause(store, "hourly", reason="first", by="ana", now=T0)
    with pytest.raises(AlreadyPaused, match="already paused by ana") as refused:
        pause(store, "hourly", reason="x", by="bo", now=T0 + HOUR, replace=False)
    assert refused.value.current == first
    snooze(store, "hourly", until=T0 + HOUR, by="ana", now=T0)
    with pytest.raises(AlreadySnoozed, match="already snoozed by ana"):
        snooze(store, "hourly", until=T0 + 2 * HOUR, by="bo", now=T0, replace=False)
    snooze(store, "hourly", until=T0 + 3 * HOUR, by="bo", now=T0 + 2 * HOUR, replace=False)


def test_the_api_refuses_an_end_far_ahead_and_unsnooze_reports_nothing_in_force(
    provider: LocalProvider,
) -> None:
    store = provider.store()
    with pytest.raises(ValueError, match="at most"):
        pause(store, "hourly", reason="x", by="a", now=T0, until=T0 + timedelta(days=100_000))
    with pytest.raises(ValueError, match="at most"):
        snooze(store, "hourly", until=datetime(9999, 12, 31, tzinfo=UTC), by="a", now=T0)
    assert unsnooze(store, "hourly", by="a", now=T0) is None
    snooze(store, "hourly", until=T0 + HOUR, by="a", now=T0)
    assert unsnooze(store, "hourly", by="a", now=T0 + 2 * HOUR) is None  # it had expired
    snooze(store, "hourly", until=T0 + 3 * HOUR, by="a", now=T0 + 2 * HOUR)
    ended = unsnooze(store, "hourly", by="a", now=T0 + 2 * HOUR)
    assert ended is not None and ended.until == T0 + 3 * HOUR
