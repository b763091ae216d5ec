"""Owners, tags and a description on jobs: checked at import, shown in every alert, with times
in the job's timezone and in UTC."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import Alert, Condition, InvalidJobDefinition, RunRequest, Watcher
from tests.support.harness import FakeClock, Harness, at, harness


def _handler(ctx: Any) -> None:
    """First docstring line becomes the description."""


def test_owner_tags_description_are_kept() -> None:
    job = cronwarden.job(
        "billing-sync",
        cron="0 2 * * *",
        max_runtime="30m",
        owner="team-data",
        tags=["billing", "eu"],
        description="Sync invoices to the ledger",
    )(_handler)
    assert (job.owner, job.tags, job.description) == (
        "team-data",
        ("billing", "eu"),
        "Sync invoices to the ledger",
    )
    plain = cronwarden.job("plain", cron="0 2 * * *", max_runtime="30m")(_handler)
    assert (plain.owner, plain.tags) == ("", ())
    assert plain.description == "First docstring line becomes the description."


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"owner": ""}, "owner ''"),
        ({"owner": "team data"}, "owner 'team data'"),
        ({"tags": "billing"}, "tags must be a list of strings, got 'billing'"),
        ({"tags": ["ok", "bad tag"]}, "tag 'bad tag'"),
        ({"tags": ["a", "a"]}, "repeat a tag"),
        ({"description": "x" * 501}, "description must be text of at most 500"),
    ],
)
def test_bad_metadata_fails_at_import_with_one_line(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidJobDefinition) as caught:
        cronwarden.job("bad", cron="0 2 * * *", max_runtime="30m", **options)
    text = str(caught.value)
    assert message in text and text.startswith("bad: ") and "\n" not in text


class Collect:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> None:
        self.alerts.append(alert)


@pytest.fixture
def berlin(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    def export(ctx: Any) -> None:
        if ctx.payload.get("fail"):
            raise RuntimeError("ledger refused")

    job = cronwarden.job(
        "nightly-export",
        cron="0 2 * * *",
        timezone="Europe/Berlin",
        max_runtime="30m",
        retry=cronwarden.Retry(10, 0, 0),
        liveness=cronwarden.Liveness(failure_threshold=1),
        owner="team-data",
        tags=["billing"],
        description="Nightly invoice export",
    )(export)
    made = harness(tmp_path, [job], clock=clock)
    yield made
    made.close()


def test_alerts_name_owner_tags_description_and_both_timezones(
    berlin: Harness, clock: FakeClock
) -> None:
    sink = Collect()
    watcher = Watcher(berlin.jobs, berlin.store, berlin.queue, notifiers=[sink], clock=clock)
    clock.set(at("2026-01-19T00:30Z"))  # 01:30 in Berlin
    outcome = berlin.engine.execute(RunRequest("nightly-export", at("2026-01-19T01:00Z")))
    assert outcome.kind.value == "succeeded"
    watcher.check()
    clock.set(at("2026-01-21T03:00Z"))  # the 2026-01-20 02:00 Berlin window is past its grace
    missed = next(a for a in watcher.check().fired if a.kind is Condition.MISSED)
    assert "Owner: team-data; tags: billing; job: Nightly invoice export." in missed.text
    # UTC first, then the job's own clock (CET in January)
    assert "last success 2026-01-19 00:30 UTC (2026-01-19 01:30 CET, Europe/Berlin)" in missed.text
    assert "2026-01-20 01:00 UTC (2026-01-20 02:00 CET, Europe/Berlin)" in missed.text
    fields = missed.fields()
    assert fields["owner"] == "team-data" and fields["tags"] == ["billing"]
    assert fields["timezone"] == "Europe/Berlin"
    assert fields["description"] == "Nightly invoice export"

    clock.set(at("2026-01-21T03:01Z"))
    berlin.engine.execute(RunRequest("nightly-export", at("2026-01-21T01:00Z")))
    recovered = watcher.check().recovered
    assert [a.kind for a in recovered] == [Condition.MISSED]
    assert "Owner: team-data" in recovered[0].text and "CET" in recovered[0].text


def test_a_job_without_owner_says_so(tmp_path: Path, clock: FakeClock) -> None:
    job = cronwarden.job("hourly", cron="0 * * * *", max_runtime="10m")(_handler)
    made = harness(tmp_path, [job], clock=clock)
    try:
        sink = Collect()
        watcher = Watcher(made.jobs, made.store, made.queue, notifiers=[sink], clock=clock)
        made.engine.execute(RunRequest("hourly", at("2026-01-20T10:00Z")))
        watcher.check()
        clock.set(at("2026-01-20T12:00:30Z"))
        (alert,) = watcher.check().fired
        assert "Owner: none declared" in alert.text
        assert "last success 2026-01-20 10:00 UTC," in alert.text  # a UTC job: UTC only
        assert alert.fields()["owner"] is None
    finally:
        made.close()
