"""``cronwarden drill JOB`` on the local provider: the forced failure's alert reaches every
routed channel (PagerDuty triggered then resolved), the forced overlap is refused and logged
naming the holder, the real job's records are untouched; a broken channel or a job no channel
routes to fails the drill."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import cronwarden
from cronwarden import JobSet, RunContext, RunRequest
from cronwarden.adapters.local import LocalProvider
from cronwarden.cli import cli
from cronwarden.model.ports import ITEM, LOCK, RUN, STATUS, Key
from cronwarden.ops.drill import Drill
from cronwarden.watch.alerting.settings import load_settings
from tests.ops.conftest import HttpSink


def _job(overlap: str = "skip") -> cronwarden.Job:
    def nightly(ctx: RunContext) -> None:
        ctx.count("rows", 1)

    return cronwarden.job(
        "nightly",
        cron="0 2 * * *",
        timezone="Europe/Berlin",
        max_runtime="10m",
        overlap=overlap,
        owner="team-data",
        tags=["billing"],
    )(nightly)


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    made = LocalProvider(str(tmp_path / "state.db"))
    yield made
    made.close()


def _settings(sink: HttpSink) -> str:
    return (
        f'[channels.data]\ntype = "slack"\nurl = "{sink.base}/data"\nowners = ["team-data"]\n'
        f'[channels.pager]\ntype = "pagerduty"\nrouting_key = "env:PD_KEY"\n'
        f'url = "{sink.base}/pd"\ntags = ["billing"]\n'
        f'[channels.other]\ntype = "slack"\nurl = "{sink.base}/other"\nowners = ["team-web"]\n'
    )


@pytest.mark.parametrize("overlap", ["skip", "defer", "fail"])
def test_drill_reaches_every_routed_channel_and_refuses_the_overlap(
    provider: LocalProvider, http_sink: HttpSink, overlap: str
) -> None:
    job = _job(overlap)
    store = provider.store()
    engine = cronwarden.Engine(JobSet([job]), store)
    real = engine.execute(RunRequest("nightly", job.schedule.floor(engine.now())))
    assert real.kind.value == "succeeded"
    before = store.get(Key(STATUS, "nightly"))
    runs_before = store.query(RUN, "nightly")

    router = load_settings(env={"CRONWARDEN_ALERTING_TOML": _settings(http_sink), "PD_KEY": "k"})
    report = Drill(job, store, router.router()).run()
    assert report.ok, [s.line() for s in report.steps]
    failure, overlap_step = report.steps
    assert "delivered to data, pager" in failure.detail
    [posted] = http_sink.at("/data")
    assert posted.json()["text"].startswith("DRILL (cronwarden drill nightly")
    assert "team-data" in posted.json()["text"] and "UTC" in posted.json()["text"]
    actions = [r.json()["event_action"] for r in http_sink.at("/pd")]
    assert actions == ["trigger", "resolve"]
    assert http_sink.at("/other") == []  # not routed to another team
    assert "named the holder" in overlap_step.detail and "(run " in overlap_step.detail

    # the real job's records are untouched, and no shadow record is left
    after = store.get(Key(STATUS, "nightly"))
    assert after is not None and before is not None and after.version == before.version
    assert store.query(RUN, "nightly") == runs_before
    for kind in (RUN, ITEM):
        assert store.query(kind, "_drill-nightly") == []
    assert store.get(Key(LOCK, "_drill-nightly")) is None
    assert store.get(Key(STATUS, "_drill-nightly")) is None


def test_drill_fails_when_a_channel_fails_or_none_routes_the_job(
    provider: LocalProvider, http_sink: HttpSink
) -> None:
    http_sink.status["/data"] = 500
    router = load_settings(env={"CRONWARDEN_ALERTING_TOML": _settings(http_sink), "PD_KEY": "k"})
    report = Drill(_job(), provider.store(), router.router()).run()
    assert not report.ok
    assert "alert not delivered to data" in report.steps[0].detail

    nobody = load_settings(
        env={
            "CRONWARDEN_ALERTING_TOML": (
                f'[channels.other]\ntype = "slack"\nurl = "{http_sink.base}/x"\n'
                'owners = ["team-web"]\n'
            )
        }
    )
    report = Drill(_job(), provider.store(), nobody.router()).run()
    assert not report.ok and "only the log saw it" in report.steps[0].detail
    assert report.steps[1].ok  # the overlap half does not depend on channels


def test_cli_drill_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, http_sink: HttpSink
) -> None:
    module = tmp_path / "drill_jobs.py"
    module.write_text(
        "import cronwarden\n"
        "@cronwarden.job('nightly', cron='0 2 * * *', max_runtime='10m', owner='team-data')\n"
        "def nightly(ctx):\n    pass\n"
    )
    monkeypatch.setenv("CRONWARDEN_LOCAL_PATH", str(tmp_path / "cli.db"))
    monkeypatch.delenv("CRONWARDEN_ALERTING_CONFIG", raising=False)
    monkeypatch.delenv("CRONWARDEN_WEBHOOK_URL", raising=False)
    monkeypatch.setenv(
        "CRONWARDEN_ALERTING_TOML", f'[channels.data]\ntype = "slack"\nurl = "{http_sink.base}/d"\n'
    )
    ok = CliRunner().invoke(cli, ["drill", "--jobs", str(module), "nightly"])
    assert ok.exit_code == 0, ok.output
    assert "ok    forced failure" in ok.output and "ok    forced overlap" in ok.output
    http_sink.status["/d"] = 404
    bad = CliRunner().invoke(cli, ["drill", "--jobs", str(module), "nightly"])
    assert bad.exit_code == 1 and "FAIL  forced failure" in bad.output
