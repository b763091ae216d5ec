"""[windows] Chaos scenarios for window accounting, each against every provider stack, each
with the checker column *windows unaccounted* (goal 0): a window that ended neither succeeded
nor excused, and is not raised by the watcher (``missed`` for a gap, ``dead_letters`` for a
dead-lettered window), is unaccounted for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwarden import Condition, RunRequest, Watcher
from cronwarden.run.accounting import WindowStatus, window_states

from .runner import JOBS, Capture, Trial, poll
from .stacks import Stack
from .test_scenarios import record

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

Q0 = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


def windows_unaccounted(
    trial: Trial, job_name: str, windows: list[datetime], now: datetime
) -> tuple[int, list[str]]:
    """The checker column: windows neither settled nor raised by a watcher check at ``now``."""
    job = JOBS[job_name]
    capture = Capture()
    report = Watcher(JOBS, trial.store, trial.queue, notifiers=[capture], clock=lambda: now).check()
    trial.alerts += capture.alerts
    raised = {a.kind for a in report.active if a.job == job_name}
    missing: list[str] = []
    states = {s.window: s for s in window_states(trial.store, job, min(windows), max(windows), now)}
    for window in windows:
        state = states[window].state
        if state.settled:
            continue
        if state is WindowStatus.DEAD_LETTERED and Condition.DEAD_LETTERS in raised:
            continue
        if state is WindowStatus.GAP and Condition.MISSED in raised:
            continue
        missing.append(f"{job_name} {states[window].window_text}: {state.value}")
    return len(missing), missing


def _row(results: list[Any], scenario: str, stack: Stack, trial: Trial, missing: list[str]) -> None:
    record(results, scenario, stack, [], extra={"windows_unaccounted": len(missing)})
    results[-1]["trials"] = 1
    results[-1]["violations"] = missing
    results[-1]["result"] = "pass" if not missing else "**FAIL**"


def test_failed_retry_behind_the_next_windows_lock(
    stack: Stack, tmp_path: Path, results: list[Any]
) -> None:
    trial = Trial(stack, tmp_path / "t0")
    try:
        trial.start_workers(2)
        w1, w2 = Q0, Q0 + timedelta(minutes=15)
        keys = [f"chaos-skip:{w:%Y-%m-%dT%H:%MZ}" for w in (w1, w2)]
        trial.publish(RunRequest("chaos-skip", w1, payload={"fail_once": True}))
        # W1 fails (its retry is due in 2 s); then W2 fires and holds the lock for 4 s, so
        # W1's retry arrives behind W2's lock
        poll(
            lambda: trial.run_record(keys[0]).get("state") == "failed",
            deadline=60,
            what="W1 failed once",
        )
        trial.publish(RunRequest("chaos-skip", w2, payload={"hold": 4}))
        runs = trial.wait_terminal(keys, deadline=120)
        count, missing = windows_unaccounted(trial, "chaos-skip", [w1, w2], w2 + timedelta(hours=1))
        assert {r["state"] for r in runs.values()} == {"succeeded"}, runs
    finally:
        trial.close()
    _row(results, "failed retry behind the next window's lock", stack, trial, missing)
    assert count == 0, missing


def test_crash_between_the_dead_letter_commit_and_the_broker_call(
    stack: Stack, tmp_path: Path, results: list[Any]
) -> None:
    trial = Trial(stack, tmp_path / "t0")
    token = trial.tmp / "token"
    token.touch()
    try:
        trial.start_workers(2, CW_CHAOS_CRASH="after_dead_letter", CW_CHAOS_TOKEN=str(token))
        request = RunRequest("chaos-dead", Q0)
        trial.publish(request)
        poll(lambda: Path(f"{token}.crashed").exists(), deadline=60, what="crash injected")
        # the redelivery (after the visibility timeout) is dead-lettered again, not acked
        poll(lambda: trial.queue.dlq_depth() >= 1, deadline=120, what="dead letter in the DLQ")
        count, missing = windows_unaccounted(trial, "chaos-dead", [Q0], Q0 + timedelta(minutes=5))
    finally:
        trial.close()
    _row(results, "crash between the dead-letter commit and the broker call", stack, trial, missing)
    assert count == 0, missing


def test_one_fire_dropped_between_two_successes(
    stack: Stack, tmp_path: Path, results: list[Any]
) -> None:
    trial = Trial(stack, tmp_path / "t0")
    try:
        trial.start_workers(1)
        w0, w1, w2 = Q0, Q0 + timedelta(minutes=1), Q0 + timedelta(minutes=2)
        for window in (w0, w2):  # the fire of w1 is dropped
            trial.publish(RunRequest("chaos-once", window))
        trial.wait_terminal([f"chaos-once:{w:%Y-%m-%dT%H:%MZ}" for w in (w0, w2)], deadline=90)
        now = w2 + timedelta(minutes=1, seconds=30)
        count, missing = windows_unaccounted(trial, "chaos-once", [w0, w1, w2], now)
        missed = [a for a in trial.alerts if a.kind is Condition.MISSED and a.job == "chaos-once"]
        assert missed and missed[0].extra["window"] == f"{w1:%Y-%m-%dT%H:%MZ}"
    finally:
        trial.close()
    _row(results, "one fire dropped between two successes", stack, trial, missing)
    assert count == 0, missing
