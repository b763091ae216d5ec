"""[windows] A window an operator resolved stays resolved: a redriven delivery of it (queue-wide
or by window, whatever its generation) is acknowledged without running, the resolve removes the
broker's dead letter of it (the watcher's queue-wide alert ends), and a re-run by hand still
runs it. ``dlq windows`` reads an existing state only, lists every window the store holds and
event consumers' dead-lettered runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import JobSet, RunContext, RunRequest, Watcher
from cronwarden.adapters.local import SQLiteStore
from cronwarden.model import RunState, format_window
from cronwarden.model.ports import REDRIVE_ATTRIBUTE, RUN, Key
from cronwarden.model.records import RunRecord, run_key_of
from cronwarden.model.runs import request_attributes
from cronwarden.ops.manual import enqueue_by_hand
from cronwarden.ops.windows import (
    dead_lettered_windows,
    drop_resolved_letters,
    redrive_window,
    resolve_window,
)
from cronwarden.run.claiming import excuse_window
from cronwarden.run.engine import Engine, Outcome, OutcomeKind
from tests.integration.test_cli import cw
from tests.support.harness import FakeClock, Harness, at, harness

W1 = at("2026-01-20T10:00Z")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(at("2026-01-20T10:20:05Z"))


@pytest.fixture
def ran() -> dict[str, Any]:
    return {"keys": [], "fail": True}


@pytest.fixture
def h(tmp_path: Path, clock: FakeClock, ran: dict[str, Any]) -> Iterator[Harness]:
    def handler(ctx: RunContext) -> None:
        ran["keys"].append(ctx.run_key)
        if ran["fail"]:
            raise RuntimeError("upstream down")

    job = cronwarden.job(
        "fragile", cron="*/15 * * * *", max_runtime="10m", retry=cronwarden.Retry(1, 0, 0)
    )(handler)
    made = harness(tmp_path, [job], clock=clock)
    yield made
    made.close()


def _dead_letter(h: Harness) -> cronwarden.Job:
    """Dead-letter W1 through the queue: the store says dead_lettered, the broker holds it."""
    job = h.jobs["fragile"]
    h.trigger.publish(RunRequest(job.name, W1))
    assert [o.kind for o in _work(h)] == [OutcomeKind.DEAD_LETTERED]
    assert h.queue.dlq_depth() == 1
    return job


def _work(h: Harness) -> list[Outcome]:
    """Handle every delivery the queue has now (settled on the queue as a worker does)."""
    outcomes = []
    for delivery in h.queue.receive(10, visibility=60):
        outcome = h.worker.handle(delivery)
        assert outcome is not None
        outcomes.append(outcome)
    return outcomes


def _run(h: Harness) -> RunRecord:
    record = h.store.get(run_key_of("fragile", format_window(W1)))
    assert record is not None
    return RunRecord.from_data(record.data)


def test_queue_wide_redrive_of_a_resolved_window_is_acked_unrun(
    h: Harness, clock: FakeClock, ran: dict[str, Any]
) -> None:
    job = _dead_letter(h)
    ran["fail"] = False
    resolve_window(h.store, job, W1, "fixed by hand", actor="ops", now=clock())
    assert h.queue.redrive(5) == 1  # the letter the resolve left in the broker
    (outcome,) = _work(h)
    assert (outcome.kind, outcome.reason) == (OutcomeKind.DUPLICATE, "resolved")
    assert "fixed by hand" in outcome.detail and "trigger --rerun" in outcome.detail
    assert ran["keys"] == [f"fragile:{format_window(W1)}"]  # the handler ran once: at first
    run = _run(h)
    assert (run.state, run.excused, run.attempt) == (RunState.EXCUSED, "resolved", 1)
    assert "fixed by hand (by ops" in str(run.excused_detail)
    assert h.queue.dlq_depth() == 0  # acknowledged, not dead-lettered again
    assert _work(h) == []


def test_a_redrive_by_window_enqueued_before_the_resolve_is_acked_unrun(
    h: Harness, clock: FakeClock, ran: dict[str, Any]
) -> None:
    job = _dead_letter(h)
    redrive_window(h.store, h.queue, job, W1)  # generation 1, queued ...
    resolve_window(h.store, job, W1, "re-sent by hand", actor="ops", now=clock())  # ... then
    ran["fail"] = False
    (outcome,) = _work(h)
    assert (outcome.kind, outcome.reason) == (OutcomeKind.DUPLICATE, "resolved")
    assert len(ran["keys"]) == 1 and _run(h).state is RunState.EXCUSED
    # an older generation than the record's is refused too (never a takeover)
    h.queue.publish(
        RunRequest(job.name, W1).to_json(),
        attributes={**request_attributes(RunRequest(job.name, W1)), REDRIVE_ATTRIBUTE: "1"},
    )
    (stale,) = _work(h)
    assert stale.kind is OutcomeKind.DUPLICATE and len(ran["keys"]) == 1


def test_a_rerun_by_hand_of_a_resolved_window_still_runs_it(
    h: Harness, clock: FakeClock, ran: dict[str, Any]
) -> None:
    job = _dead_letter(h)
    resolve_window(h.store, job, W1, "fixed by hand", actor="ops", now=clock())
    ran["fail"] = False
    told = enqueue_by_hand(h, job, W1, rerun=True)  # what `trigger --rerun` does
    assert told.code == 0, told
    outcomes = _work(h)
    assert [o.kind for o in outcomes] == [OutcomeKind.SUCCEEDED]
    assert len(ran["keys"]) == 2 and _run(h).state is RunState.SUCCEEDED


@pytest.mark.parametrize("excused", ["paused", "overlap_skip"])
def test_a_redrive_of_a_window_excused_otherwise_still_runs(
    h: Harness, clock: FakeClock, ran: dict[str, Any], excused: str
) -> None:
    """Only an operator's resolve stops a redrive: a dead letter of a window a pause or an
    overlap skip excused runs when redriven (a redrive is a run by hand there, as before)."""
    job = h.jobs["fragile"]
    request = RunRequest(job.name, W1)
    assert excuse_window(
        h.store, job, request, clock(), retention=timedelta(days=30), reason=excused, detail="x"
    )
    ran["fail"] = False
    h.queue.publish(
        request.to_json(), attributes={**request_attributes(request), REDRIVE_ATTRIBUTE: "1"}
    )
    outcomes = _work(h)
    assert [o.kind for o in outcomes] == [OutcomeKind.SUCCEEDED]
    assert _run(h).state is RunState.SUCCEEDED


def test_dropping_the_letters_of_a_resolved_window_ends_the_queue_wide_alert(
    h: Harness, clock: FakeClock
) -> None:
    w = Watcher(h.jobs, h.store, h.queue, notifiers=[], clock=clock)
    w.check()
    job = _dead_letter(h)
    h.queue.publish(b"garbage")  # another letter, of no job: it stays
    h.worker.poll(max_messages=1, wait=0)  # not a run request: dead-lettered as malformed
    assert h.queue.dlq_depth() == 2
    assert drop_resolved_letters(h.store, h.queue, job, W1) == 0  # not resolved: kept
    assert h.queue.dlq_depth() == 2
    resolve_window(h.store, job, W1, "fixed by hand", actor="ops", now=clock())
    assert drop_resolved_letters(h.store, h.queue, job, W1) == 1
    assert [letter.body for letter in h.queue.dlq_peek(10)] == [b"garbage"]
    h.queue.dlq_remove([letter.message_id for letter in h.queue.dlq_peek(10)])
    report = w.check()
    assert report.ok, [a.text for a in report.active]


def test_dlq_windows_lists_old_windows_and_consumer_runs(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    try:
        fails = cronwarden.Retry(1, 0, 0)

        def boom(ctx: RunContext) -> None:
            raise RuntimeError("cannot render")

        job = cronwarden.job("nightly", cron="0 2 * * *", max_runtime="1m", retry=fails)(boom)
        render = cronwarden.consumer("render", key="n", max_runtime="1m", retry=fails)(boom)
        jobs = JobSet([job], [render])
        old = at("2026-01-20T02:00Z")
        engine = Engine(jobs, store, cronwarden.EngineSettings(clock=lambda: old))
        assert engine.execute(RunRequest("nightly", old)).kind is OutcomeKind.DEAD_LETTERED
        event = RunRequest("render", old, payload={"n": 2}, slot="e:2")
        assert engine.execute(event).kind is OutcomeKind.DEAD_LETTERED
        two_months_on = old + timedelta(days=62)
        listed = dead_lettered_windows(jobs, store, None, two_months_on)
        assert [(d.job, d.window, d.event_key) for d in listed] == [
            ("nightly", "2026-01-20T02:00Z", False),
            ("render", "e:2", True),
        ]
        # a horizon given still bounds the jobs' windows (the caller asked for it)
        bounded = dead_lettered_windows(jobs, store, None, two_months_on, horizon=timedelta(30))
        assert [d.job for d in bounded] == ["render"]
    finally:
        store.close()


# -- the command line (real processes) -----------------------------------------------------
JOBS = """
import os
import cronwarden

@cronwarden.job("fragile", cron="*/15 * * * *", max_runtime="1m",
                retry=cronwarden.Retry(1, 0, 0))
def fragile(ctx):
    with open(os.environ["CW_RAN"], "a") as ran:
        ran.write(ctx.run_key + "\\n")
    if os.path.exists(os.environ["CW_FAIL_FLAG"]):
        raise RuntimeError("upstream down")
"""


def _cli(tmp_path: Path) -> tuple[str, dict[str, str]]:
    jobs = tmp_path / "fragile_jobs.py"
    jobs.write_text(JOBS)
    env = {"CW_FAIL_FLAG": str(tmp_path / "fail"), "CW_RAN": str(tmp_path / "ran.txt")}
    return str(jobs), env


def _window(ago: timedelta) -> str:
    now = datetime.now(UTC).replace(second=0, microsecond=0) - ago
    return format_window(now.replace(minute=now.minute // 15 * 15))


def test_cli_resolve_removes_the_letter_and_a_queued_redrive_does_not_run(
    tmp_path: Path,
) -> None:
    jobs, env = _cli(tmp_path)
    window = _window(timedelta(minutes=30))
    (tmp_path / "fail").touch()
    first = cw(tmp_path, "trigger", "--jobs", jobs, "fragile", "--window", window, env=env)
    assert first.returncode == 1, first.stderr
    by_window = ("--jobs", jobs, "--job", "fragile", "--window", window)
    queued = cw(tmp_path, "dlq", "redrive", *by_window, env=env)
    assert queued.returncode == 0, queued.stderr
    resolved = cw(tmp_path, "dlq", "resolve", *by_window, "--reason", "fixed by hand", env=env)
    assert resolved.returncode == 0, resolved.stderr
    assert resolved.stdout.splitlines()[1] == (
        f"removed 1 dead letter(s) of fragile:{window} from the dead-letter queue"
    )
    assert "dead-letter queue: 0 message(s)" in cw(tmp_path, "dlq", "list", "-o", "table").stdout
    (tmp_path / "fail").unlink()
    worked = cw(tmp_path, "run", "--jobs", jobs, "--once", env=env)
    # (its exit status also counts the watcher's view of the other windows: not asserted)
    assert "1 duplicate" in worked.stdout, worked.stdout + worked.stderr
    ran = (tmp_path / "ran.txt").read_text().splitlines()
    assert ran.count(f"fragile:{window}") == 1  # the first, failed run only
    history = cw(tmp_path, "history", "--jobs", jobs, "fragile", env=env)
    rows = [json.loads(line) for line in history.stdout.splitlines()]
    (row,) = [r for r in rows if r["window"] == window]
    assert (row["state"], row["excused"]) == ("excused", "resolved")
    store = SQLiteStore(str(tmp_path / "state.db"))
    try:
        record = store.get(Key(RUN, "fragile", window))
        assert record is not None
        assert "fixed by hand" in str(RunRecord.from_data(record.data).excused_detail)
    finally:
        store.close()


def test_cli_dlq_windows_never_creates_state_and_lists_old_windows(tmp_path: Path) -> None:
    jobs, env = _cli(tmp_path)
    for args in (
        ("windows", "--jobs", jobs),
        ("resolve", "--jobs", jobs, "--job", "fragile", "--window", _window(timedelta(0))),
        ("redrive", "--jobs", jobs, "--job", "fragile", "--window", _window(timedelta(0))),
    ):
        reason = ("--reason", "x") if "resolve" in args else ()
        missing = cw(tmp_path, "dlq", *args, *reason, "--state", "typo/state.db", env=env)
        assert missing.returncode == 2, (args, missing.stdout, missing.stderr)
        assert missing.stderr.startswith(f"error: no cronwarden state at {tmp_path}/typo/state.db")
        assert missing.stderr.count("\n") == 1
    assert not (tmp_path / "typo").exists()
    (tmp_path / "fail").touch()
    old = _window(timedelta(days=62))
    assert (
        cw(tmp_path, "trigger", "--jobs", jobs, "fragile", "--window", old, env=env).returncode == 1
    )
    listed = cw(tmp_path, "dlq", "windows", "--jobs", jobs, env=env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[:2] == [
        "1 dead-lettered window(s) in the store",
        f"fragile {old}  in the broker  attempts 1  RuntimeError: upstream down",
    ]
