"""A run that ends with quarantined items is not a plain success: the run and the status say
so, the watcher raises ``quarantined`` naming the items until ``cronwarden ledger resolve``
records a resolution (``done``, or ``redo``: the window runs again for those items only)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest, Uncertain
from cronwarden.adapters.local import LocalProvider
from cronwarden.cli import cli
from cronwarden.hosting.trigger import Worker
from cronwarden.jobs import JobSet
from cronwarden.model.ports import ITEM, RUN, Key
from cronwarden.model.records import StatusRecord, status_key_of
from cronwarden.run.engine import Engine, EngineSettings
from cronwarden.watch.watcher import Condition, Watcher
from tests.support.harness import FakeClock, at

W = at("2026-01-20T02:00Z")
WINDOW = "2026-01-20T02:00Z"


class Job:
    def __init__(self) -> None:
        self.effects: Counter[str] = Counter()
        self.raise_at: str | None = "i3"

    def __call__(self, ctx: RunContext) -> None:
        for item in ctx.items([f"i{n}" for n in range(6)]):
            if item.key == self.raise_at:
                self.raise_at = None
                raise RuntimeError("died mid-item")
            self.effects[item.key] += 1


@pytest.fixture
def setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    provider = LocalProvider(str(tmp_path / "state.db"))
    handler = Job()
    job = cronwarden.job("fan", cron="0 2 * * *", max_runtime="5m")(handler)
    clock = FakeClock(at("2026-01-20T02:01Z"))
    engine = Engine(
        JobSet([job]),
        provider.store(),
        EngineSettings(batch_size=3, uncertain=Uncertain.QUARANTINE, clock=clock),
    )
    yield provider, handler, engine, JobSet([job]), clock
    provider.close()


def cw(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        list(args),
        env={"CRONWARDEN_PROVIDER": "local", "CRONWARDEN_LOCAL_PATH": str(tmp_path / "state.db")},
        catch_exceptions=False,
    )
    return result.exit_code, result.output


def quarantined_run(setup) -> None:  # type: ignore[no-untyped-def]
    provider, _handler, engine, _, _ = setup
    assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.FAILED
    second = engine.execute(RunRequest("fan", W))
    assert second.kind is OutcomeKind.SUCCEEDED and second.reason == "quarantined"
    assert "i3" in second.detail
    run = provider.store().get(Key(RUN, "fan", WINDOW))
    assert run is not None and run.data["quarantined"] == ["i3"]
    status = provider.store().get(status_key_of("fan"))
    assert StatusRecord.from_data(status.data).quarantined == {WINDOW: ["i3"]}  # type: ignore[union-attr]


def test_quarantine_alerts_until_resolved_done(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    provider, _handler, _engine, jobs, clock = setup
    quarantined_run(setup)
    watcher = Watcher(jobs, provider.store(), None, notifiers=[], clock=clock)
    report = watcher.check()
    alert = next(a for a in report.active if a.kind is Condition.QUARANTINED)
    assert "i3" in alert.text and "cronwarden ledger resolve" in alert.text
    code, out = cw(tmp_path, "ledger", "list", "fan")
    assert code == 0 and f"{WINDOW}  i3  quarantined" in out
    code, out = cw(
        tmp_path,
        "ledger",
        "resolve",
        "fan",
        "--window",
        WINDOW,
        "i2",
        "--as",
        "done",
        "--reason",
        "x",
    )
    assert code == 2 and "not quarantined" in out
    code, out = cw(
        tmp_path,
        "ledger",
        "resolve",
        "fan",
        "--window",
        "2026-01-20T03:00:00+01:00",  # the window in another ISO form, as `ledger list` takes
        "i3",
        "--as",
        "done",
        "--reason",
        "mail log shows it was sent",
    )
    assert code == 0 and "resolved 1 item(s)" in out, out
    report = watcher.check()
    assert all(a.kind is not Condition.QUARANTINED for a in report.active)
    assert any(a.kind is Condition.QUARANTINED for a in report.recovered)
    item = provider.store().get(Key(ITEM, "fan", f"{WINDOW}/i3"))
    assert item is not None and item.data["state"] == "done"
    assert item.data["resolution"]["reason"] == "mail log shows it was sent"
    code, out = cw(tmp_path, "ledger", "list", "fan", "--state", "all")
    assert "resolved as done" in out


def test_resolve_redo_runs_the_window_again_for_those_items(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    provider, handler, engine, _jobs, _clock = setup
    quarantined_run(setup)
    before = dict(handler.effects)
    code, out = cw(
        tmp_path,
        "ledger",
        "resolve",
        "fan",
        "--window",
        WINDOW,
        "i3",
        "--as",
        "redo",
        "--reason",
        "not sent",
    )
    assert code == 0 and "enqueued fan:2026-01-20T02:00Z" in out, out
    [queued] = provider.queue().receive(1, visibility=30.0, wait=0.1)
    assert queued.attributes["job"] == "fan" and queued.attributes["run_key"] == f"fan:{WINDOW}"
    provider.queue().retry(queued, 0.0)
    assert Worker(engine, provider.queue()).poll(wait=0.1) == 1
    assert handler.effects - Counter(before) == Counter({"i3": 1})
    run = provider.store().get(Key(RUN, "fan", WINDOW))
    assert run is not None and run.data["state"] == "succeeded" and "quarantined" not in run.data
    status = provider.store().get(status_key_of("fan"))
    assert StatusRecord.from_data(status.data).quarantined == {}  # type: ignore[union-attr]


def test_list_of_a_name_the_store_does_not_know_is_an_error(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A mistyped job or window is exit 2 naming what the store holds, never "no quarantined
    items" (exit 0, read as nothing to resolve while items of the real job wait)."""
    quarantined_run(setup)
    code, out = cw(tmp_path, "ledger", "list", "fna")
    assert code == 2 and "no records of a job named 'fna'" in out and "fan" in out, out
    code, out = cw(tmp_path, "ledger", "list", "fan", "--window", "2026-01-21T02:00Z")
    assert code == 2 and "no run of fan for window 2026-01-21T02:00Z" in out, out
    code, out = cw(tmp_path, "ledger", "list", "fan", "--window", "2026-01-20T02:00:30Z")
    assert code == 2 and "minute boundary" in out, out
    # any ISO 8601 form of the window's instant finds its items
    for window in (WINDOW, "2026-01-20T02:00:00Z", "2026-01-20T03:00:00+01:00"):
        code, out = cw(tmp_path, "ledger", "list", "fan", "--window", window)
        assert code == 0 and f"{WINDOW}  i3  quarantined" in out, (window, out)
    # a known job and window with nothing in the state asked for: exit 0, said plainly
    code, out = cw(tmp_path, "ledger", "list", "fan", "--window", WINDOW, "--state", "released")
    assert code == 0 and f"no released items for fan in window {WINDOW}" in out, out


def test_list_of_a_consumer_whose_key_reads_as_a_date(tmp_path: Path) -> None:
    """An event consumer's key is its run's window text as given: a key that reads as a date is
    not turned into a window."""
    provider = LocalProvider(str(tmp_path / "state.db"))
    try:

        def render(ctx: RunContext) -> None:
            for _item in ctx.items(["a", "b"]):
                pass

        consumer = cronwarden.consumer("by-day", key=lambda e: e["day"], max_runtime="1m")(render)
        jobs = JobSet([], consumers=[consumer])
        day = "2026-01-20"
        request = RunRequest("by-day", W, reason="event", payload={"day": day}, slot=day)
        assert Engine(jobs, provider.store()).execute(request).kind is OutcomeKind.SUCCEEDED
    finally:
        provider.close()
    code, out = cw(tmp_path, "ledger", "list", "by-day", "--window", "2026-01-20", "--state", "all")
    assert code == 0 and "2026-01-20  a  done" in out, out
