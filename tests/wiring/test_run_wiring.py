"""Every path wires the same alerting: ``cronwarden run --once``, ``trigger`` and ``check`` send
the configured channels and per-job pings; one failed run is one incident; a run that breaks
its ``Expect`` makes the status suspicious until a later run meets it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import write_jobs

from .conftest import HttpSink

W = "2026-01-01T00:00Z"

JOBS = (
    "@cronwarden.job('poison', cron='*/5 * * * *', max_runtime='1m', owner='team-data',\n"
    "                retry=cronwarden.Retry(1, 0, 0),\n"
    "                liveness=cronwarden.Liveness(failure_threshold=1))\n"
    "def poison(ctx): raise RuntimeError('the export broke')\n"
)
COUNTING = (
    "import pathlib\n"
    "@cronwarden.job('counted', cron='* * * * *', max_runtime='1m', owner='team-data',\n"
    "                expect=cronwarden.Expect(min_items=1))\n"
    "def counted(ctx):\n"
    "    n = int((pathlib.Path(__file__).parent / 'items.txt').read_text())\n"
    "    if n: ctx.count('items_done', n)\n"
)


def _alerting(sink: HttpSink, *, pings: bool = True) -> dict[str, str]:
    toml = (
        "[channels.pager]\n"
        'type = "pagerduty"\n'
        'routing_key = "env:PD_KEY"\n'
        f'url = "{sink.base}/pd"\n'
        "[channels.chat]\n"
        'type = "slack"\n'
        f'url = "{sink.base}/slack"\n'
    )
    if pings:
        toml += f'[job_pings]\nurl = "{sink.base}/ping/{{job}}"\nformat = "healthchecks"\n'
    return {"CRONWARDEN_ALERTING_TOML": toml, "PD_KEY": "k" * 32}


def _pd(sink: HttpSink) -> list[dict[str, str]]:
    return [r.json() for r in sink.at("/pd")]


def test_run_once_sends_job_pings_and_one_incident_per_failed_run(
    cw, http_sink: HttpSink, tmp_path: Path
) -> None:
    jobs = write_jobs(tmp_path / "jobs.py", JOBS)
    result = cw("run", "--jobs", jobs, "--once", env=_alerting(http_sink))
    assert result.code == 1, result
    # per-job pings: start, then fail with the error text (Healthchecks format)
    assert len(http_sink.at("/ping/poison/start")) == 1, http_sink.received
    fails = http_sink.at("/ping/poison/fail")
    assert len(fails) == 1 and b"the export broke" in fails[0].body
    # one dead-lettered run: one PagerDuty incident, for its job, naming both conditions
    events = _pd(http_sink)
    assert [(e["event_action"], e["dedup_key"]) for e in events] == [
        ("trigger", "cronwarden/poison/dead_letters")
    ], events
    details = events[0]["payload"]["custom_details"]
    assert details["conditions"] == ["dead_letters", "failing"]
    assert "failing" in events[0]["payload"]["summary"]
    assert len(http_sink.at("/slack")) == 1
    # the alert was told when it fired: a later check does not tell it again
    again = cw("check", "--jobs", jobs, env=_alerting(http_sink))
    assert again.code == 1 and "ALERT dead_letters" in again.stdout, again
    assert len(_pd(http_sink)) == 1 and len(http_sink.at("/slack")) == 1


def test_trigger_sends_job_pings(cw, http_sink: HttpSink, tmp_path: Path) -> None:
    jobs = write_jobs(tmp_path / "jobs.py", JOBS)
    result = cw("trigger", "--jobs", jobs, "poison", "--window", W, env=_alerting(http_sink))
    assert result.code == 1, result
    assert len(http_sink.at("/ping/poison/start")) == 1
    assert len(http_sink.at("/ping/poison/fail")) == 1


def test_run_once_with_the_webhook_variable_tells_it(
    cw, http_sink: HttpSink, tmp_path: Path
) -> None:
    jobs = write_jobs(tmp_path / "jobs.py", JOBS)
    env = {"CRONWARDEN_WEBHOOK_URL": f"{http_sink.base}/hook"}
    result = cw("run", "--jobs", jobs, "--once", env=env)
    assert result.code == 1, result
    told = [r.json() for r in http_sink.at("/hook")]
    assert len(told) == 1, told  # one notification, naming dead letters and failing
    assert "dead_letters" in json.dumps(told[0]) and "failing" in json.dumps(told[0])


def test_broken_expectation_reaches_the_status_and_recovers(
    cw, http_sink: HttpSink, tmp_path: Path
) -> None:
    jobs = write_jobs(tmp_path / "jobs.py", COUNTING)
    (tmp_path / "items.txt").write_text("0")
    env = _alerting(http_sink, pings=False)
    first = cw("run", "--jobs", jobs, "--once", env=env)
    assert first.code == 0, first
    check = cw("check", "--jobs", jobs, env=env)
    assert check.code == 1, check
    assert "ALERT suspicious" in check.stdout and "team-data" in check.stdout, check
    assert [e["event_action"] for e in _pd(http_sink)] == ["trigger"]
    (tmp_path / "items.txt").write_text("3")
    again = cw("trigger", "--jobs", jobs, "counted", "--rerun", env=env)
    assert again.code == 0, again
    healthy = cw("check", "--jobs", jobs, env=env)
    assert healthy.code == 0, healthy
    assert [e["event_action"] for e in _pd(http_sink)] == ["trigger", "resolve"]


def test_run_once_exits_1_for_an_alert_that_reached_no_channel(cw, tmp_path: Path) -> None:
    """The run succeeded, but it did nothing it was expected to (a ``suspicious`` alert) and
    no channel is configured: this exit status is the only way the alert reaches a person.
    With a channel that took it (the test above), the same run exits 0."""
    jobs = write_jobs(tmp_path / "jobs.py", COUNTING)
    (tmp_path / "items.txt").write_text("0")
    first = cw("run", "--jobs", jobs, "--once", "-o", "table")
    assert first.code == 1, first
    line = first.stdout.splitlines()[0]
    assert line.startswith("not ok: 1 alert(s) active (counted suspicious)"), first
    assert "not delivered to any channel" in line and "1 run(s) succeeded" in line, first
    (tmp_path / "items.txt").write_text("3")
    again = cw("trigger", "--jobs", jobs, "counted", "--rerun")
    assert again.code == 0, again
    healthy = cw("run", "--jobs", jobs, "--once", "-o", "table")
    assert healthy.code == 0, healthy
