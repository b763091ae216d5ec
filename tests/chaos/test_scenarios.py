"""Chaos scenarios, each against every provider stack (local, GCP emulators, Azure emulators).

Each trial runs real worker processes, injects its fault, waits (polls with deadlines) for the
outcome, then hands the history to the checker. Figures go to the report table; any violation
fails the test. ``CW_CHAOS=full`` for the full sizes (``nox -s chaos``).
"""

from __future__ import annotations

import random
import signal
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cronwarden import RunRequest
from cronwarden.ports import STATUS, Key

from .checker import Expect, Verdict
from .conftest import FULL
from .runner import Trial, poll
from .stacks import Stack

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
full = pytest.mark.chaos_full
W0 = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)
ORDER = {
    name: i
    for i, name in enumerate(
        [
            "duplicate-delivery storm",
            "SIGKILL mid-run",
            "paused owner (SIGSTOP)",
            "poison job + redrive",
            "store outage",
            "broker outage",
            "malformed input (fuzz)",
            "clock skew ±30 s",
            "scheduler double fire",
            "missed fires + catch-up",
        ]
    )
}


def items(n: int) -> list[str]:
    return [str(i) for i in range(n)]


def record(
    results: list[dict[str, Any]],
    scenario: str,
    stack: Stack,
    verdicts: list[Verdict],
    *,
    detection: list[float] | None = None,
    notes: str = "",
    extra: dict[str, Any] | None = None,
) -> None:
    row: dict[str, Any] = {
        "scenario": scenario,
        "order": ORDER.get(scenario, 99),
        "provider": stack.name,
        "trials": len(verdicts),
        "full": FULL,
    }
    for name in (
        "effects",
        "duplicates",
        "redone_uncertain",
        "losses",
        "stale_writes",
        "live_owner_overlaps",
        "canary_leaks",
        "commits_accepted",
        "commits_refused",
        "commits_errored",
    ):
        row[name] = sum(getattr(v, name) for v in verdicts)
    row["violations"] = [text for v in verdicts for text in v.violations]
    if detection:
        row["detection_s"] = statistics.median(detection)
        row["detection_max_s"] = max(detection)
    row["result"] = "pass" if not row["violations"] else "**FAIL**"
    row["notes"] = notes
    row.update(extra or {})
    results.append(row)


def assert_clean(verdicts: list[Verdict]) -> None:
    problems = [text for v in verdicts for text in v.violations]
    assert not problems, "\n".join(problems[:20])


# -- 1. duplicate-delivery storm ---------------------------------------------------------------
def test_duplicate_delivery_storm(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """The same run request delivered many times across many worker processes."""
    trials, copies, nworkers = (3, 50, 8) if FULL else (1, 10, 3)
    verdicts = []
    for t in range(trials):
        trial = Trial(stack, tmp_path / f"t{t}")
        try:
            trial.start_workers(nworkers)
            request = RunRequest("chaos-fanout", W0, payload={"items": 12, "delay": 0.02})
            trial.publish(request, copies)
            trial.wait_terminal([request.run_key], deadline=90)
            # every copy is settled once the status counted the others as duplicates
            poll(
                lambda: (
                    (trial.store.get(Key(STATUS, "chaos-fanout")).data or {}).get("duplicates", 0)
                    >= copies - 1
                ),
                deadline=90,
                what="all copies settled",
                every=0.2,
            )
            verdicts.append(trial.verdict(Expect({request.run_key: items(12)})))
        finally:
            trial.close()
    record(
        results,
        "duplicate-delivery storm",
        stack,
        verdicts,
        notes=f"{copies} copies of one request across {nworkers} worker processes per trial",
    )
    assert_clean(verdicts)


# -- 2. SIGKILL mid-run ------------------------------------------------------------------------
CRASH_POINTS = ("before_claim", "mid_ledger", "after_effect", "random")


def _crash_time(token: Path) -> float | None:
    marker = Path(f"{token}.crashed")
    return float(marker.read_text().split()[0]) if marker.exists() else None


@full
def test_sigkill_mid_run(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """A worker is SIGKILLed before its claim, mid-ledger, between a side effect and its mark,
    or at a random moment; another worker resumes once the lease and visibility run out."""
    rng = random.Random(7)
    rounds = 2
    verdicts, detection = [], []
    n = 20
    for t in range(rounds * len(CRASH_POINTS)):
        point = CRASH_POINTS[t % len(CRASH_POINTS)]
        trial = Trial(stack, tmp_path / f"t{t}", margin=1.0)
        try:
            token = trial.tmp / "token"
            token.touch()
            env = {
                "CW_CHAOS_CRASH": point,
                "CW_CHAOS_TOKEN": str(token),
                "CW_CHAOS_CRASH_AT": str(rng.randint(2, n - 3)),
                "CW_CHAOS_RUNTIME": "4s",
            }
            trial.start_workers(2, **env)
            request = RunRequest("chaos-fanout", W0, payload={"items": n, "delay": 0.05})
            trial.publish(request)
            killed_at: float | None = None
            if point == "random":
                poll(lambda: trial.takeover_times(request.run_key), deadline=60, what="claim")
                time.sleep(rng.uniform(0.0, 1.0))  # injection: a random moment mid-run
                victim = max(
                    trial.workers,
                    key=lambda p: b"run.started" in p.log.read_bytes(),
                )
                killed_at = time.time()
                trial.kill(victim)
            else:
                poll(lambda: _crash_time(token), deadline=60, what=f"crash at {point}")
                killed_at = _crash_time(token)
            trial.start_worker(**{k: v for k, v in env.items() if k != "CW_CHAOS_CRASH"})
            trial.wait_terminal([request.run_key], deadline=120)
            fences = trial.takeover_times(request.run_key)
            resumed = [at for at in fences.values() if killed_at and at > killed_at]
            if resumed and killed_at:
                detection.append(min(resumed) - killed_at)
            verdicts.append(trial.verdict(Expect({request.run_key: items(n)})))
        finally:
            trial.close()
    record(
        results,
        "SIGKILL mid-run",
        stack,
        verdicts,
        detection=detection,
        notes="crash points: before claim, mid-ledger (item pending, no effect), between side "
        "effect and done mark, random moment; lease = 4 s max runtime + 1 s margin; detection = "
        "kill → the next owner's claim accepted (lease expiry + redelivery)",
    )
    assert_clean(verdicts)


# -- 3. paused owner ---------------------------------------------------------------------------
@full
def test_paused_owner(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """SIGSTOP the owner past its lease; another worker takes over; SIGCONT the first."""
    verdicts, detection = [], []
    n = 30
    for t in range(2):
        trial = Trial(stack, tmp_path / f"t{t}", margin=1.0)
        try:
            env = {"CW_CHAOS_RUNTIME": "4s"}
            (first,) = trial.start_workers(1, **env)
            request = RunRequest("chaos-fanout", W0, payload={"items": n, "delay": 0.05})
            trial.publish(request)
            poll(
                lambda: trial.takeover_times(request.run_key) and _effects(trial) >= 6 + 3 * t,
                deadline=60,
                what="first owner mid-run",
            )
            first.signal(signal.SIGSTOP)
            paused = time.time()
            trial.start_worker(**env)
            trial.wait_terminal([request.run_key], deadline=120)
            fences = trial.takeover_times(request.run_key)
            detection.append(fences[max(fences)] - paused)
            first.signal(signal.SIGCONT)
            poll(
                lambda: b"lease.lost" in first.log.read_bytes(),
                deadline=60,
                what="the paused owner noticed it lost the lease",
            )
            verdicts.append(trial.verdict(Expect({request.run_key: items(n)})))
        finally:
            trial.close()
    record(
        results,
        "paused owner (SIGSTOP)",
        stack,
        verdicts,
        detection=detection,
        notes="detection = SIGSTOP → takeover claim accepted; the resumed owner must log "
        "lease.lost and have no write accepted",
    )
    assert_clean(verdicts)


def _effects(trial: Trial) -> int:
    from .history import connect

    conn = connect(trial.history)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0])
    finally:
        conn.close()


# -- 4. poison job -----------------------------------------------------------------------------
def test_poison_job_dead_lettered_alerted_redriven(
    stack: Stack, tmp_path: Path, results: list[Any]
) -> None:
    """Fails every time → retries with backoff → dead-lettered, visible (DLQ + alert);
    after a fix, redrive runs it. Its error text carries secrets (the canary)."""
    verdicts, detection = [], []
    for t in range(2 if FULL else 1):
        trial = Trial(stack, tmp_path / f"t{t}", max_deliveries=5)
        try:
            trial.start_workers(2)
            request = RunRequest("chaos-poison", W0)
            published = time.time()
            trial.publish(request)
            poll(lambda: trial.queue.dlq_depth() >= 1, deadline=90, what="dead letter")
            alerts = trial.watch()
            detection.append(time.time() - published)
            kinds = {a.kind.value for a in alerts if a.firing}
            run = trial.run_record(request.run_key)
            before = trial.verdict(
                Expect({request.run_key: None}, may_dead_letter={request.run_key})
            )
            assert run["state"] == "dead_lettered", run
            assert {"dead_letters", "failing"} <= kinds, kinds
            (letter,) = trial.queue.dlq_peek(10)
            assert letter.reason == "MaxAttemptsExceeded" and letter.description
            (trial.tmp / "fixed").touch()
            assert trial.queue.redrive(10) == 1
            trial.wait_terminal([request.run_key], deadline=60)
            poll(
                lambda: trial.run_record(request.run_key)["state"] == "succeeded",
                deadline=60,
                what="redriven run succeeded",
            )
            after = trial.verdict(Expect({request.run_key: None}))
            after.violations += before.violations
            after.canary_leaks += before.canary_leaks
            after.losses += before.losses
            verdicts.append(after)
        finally:
            trial.close()
    record(
        results,
        "poison job + redrive",
        stack,
        verdicts,
        detection=detection,
        notes="3 attempts, backoff 1 s → 2 s; detection = publish → in the DLQ with "
        "`dead_letters` and `failing` alerts raised; the exception text and a log line carry a "
        "registered token and a connection-string key (secrets canary)",
    )
    assert_clean(verdicts)
