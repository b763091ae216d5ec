"""Chaos scenarios, each against every provider stack (local, GCP emulators, Azure emulators).

Each trial runs real worker processes, injects its fault, waits (polls with deadlines) for the
outcome, then hands the history to the checker. Figures go to the report table; any violation
fails the test. ``CW_CHAOS=full`` for the full sizes (``nox -s chaos``).
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwarden import RunRequest, Trigger
from cronwarden.model.ports import STATUS, Key

from .checker import Expect, Verdict
from .conftest import FULL
from .history import connect
from .runner import JOBS, Trial, poll
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
            "SIGKILL after a lock hand-over",
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


def _status(trial: Trial, job: str) -> dict[str, Any]:
    found = trial.store.get(Key(STATUS, job))
    return dict(found.data) if found else {}


def _effects(trial: Trial) -> int:
    conn = connect(trial.history)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0])
    finally:
        conn.close()


# -- 1. duplicate-delivery storm ---------------------------------------------------------------
def _storm(trial: Trial, copies: int, nworkers: int) -> Verdict:
    trial.start_workers(nworkers, CW_CHAOS_RUNTIME="2s")
    request = RunRequest("chaos-fanout", W0, payload={"items": 12, "delay": 0.02})
    trial.publish(request, copies)
    trial.wait_terminal([request.run_key], deadline=90)
    # every copy is settled once the status counted all the others as duplicates
    poll(
        lambda: _status(trial, "chaos-fanout").get("duplicates", 0) >= copies - 1,
        deadline=90,
        what="all copies settled",
        every=0.2,
    )
    return trial.verdict(Expect({request.run_key: items(12)}))


def test_duplicate_delivery_storm(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """The same run request delivered many times across many worker processes."""
    trials, copies, nworkers = (3, 50, 8) if FULL else (1, 8, 2)
    verdicts = []
    for t in range(trials):
        trial = Trial(stack, tmp_path / f"t{t}")
        try:
            verdicts.append(_storm(trial, copies, nworkers))
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
KILL_ITEMS = 20


def _crash_time(token: Path) -> float | None:
    marker = Path(f"{token}.crashed")
    return float(marker.read_text().split()[0]) if marker.exists() else None


def _sigkill(trial: Trial, point: str, rng: random.Random) -> tuple[Verdict, float | None]:
    token = trial.tmp / "token"
    token.touch()
    env = {
        "CW_CHAOS_CRASH": point,
        "CW_CHAOS_TOKEN": str(token),
        "CW_CHAOS_CRASH_AT": str(rng.randint(2, KILL_ITEMS - 3)),
        "CW_CHAOS_RUNTIME": "3s",
    }
    trial.start_workers(2, **env)
    request = RunRequest("chaos-fanout", W0, payload={"items": KILL_ITEMS, "delay": 0.05})
    trial.publish(request)
    if point == "random":
        poll(lambda: trial.takeover_times(request.run_key), deadline=60, what="claim")
        time.sleep(rng.uniform(0.0, 1.0))  # injection: a random moment of the run
        victim = max(trial.workers, key=lambda p: b"run.started" in p.log.read_bytes())
        killed_at: float | None = time.time()
        trial.kill(victim)
    else:
        poll(lambda: _crash_time(token), deadline=60, what=f"crash at {point}")
        killed_at = _crash_time(token)
    trial.start_worker(**{k: v for k, v in env.items() if k != "CW_CHAOS_CRASH"})
    trial.wait_terminal([request.run_key], deadline=120)
    fences = trial.takeover_times(request.run_key)
    resumed = [at for at in fences.values() if killed_at and at > killed_at]
    detected = min(resumed) - killed_at if resumed and killed_at else None
    return trial.verdict(Expect({request.run_key: items(KILL_ITEMS)})), detected


@full
def test_sigkill_mid_run(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """A worker is SIGKILLed before its claim, mid-ledger, between a side effect and its mark,
    or at a random moment; another worker resumes once the lease and visibility run out."""
    rng = random.Random(7)
    verdicts, detection = [], []
    for t, point in enumerate(CRASH_POINTS):
        trial = Trial(stack, tmp_path / f"t{t}", margin=0.5)
        try:
            verdict, detected = _sigkill(trial, point, rng)
        finally:
            trial.close()
        verdicts.append(verdict)
        if detected is not None:
            detection.append(detected)
    record(
        results,
        "SIGKILL mid-run",
        stack,
        verdicts,
        detection=detection,
        notes="one trial per crash point: before the claim commit, mid-ledger (item pending, no "
        "effect yet), between a side effect and its done mark, a random moment; lease = 3 s max "
        "runtime + 0.5 s margin; detection = kill → the next owner's claim accepted",
    )
    assert_clean(verdicts)


# -- 2b. SIGKILL after a lock hand-over ---------------------------------------------------------
HANDOVER_WINDOWS = 4


def _handover_kill(trial: Trial) -> Verdict:
    """A worker taking a batch of windows dies right after a completion that claimed the next
    window in the same commit: that window's lease runs out and another worker runs it."""
    token = trial.tmp / "token"
    token.touch()
    env = {
        "CW_CHAOS_CRASH": "after_handover",
        "CW_CHAOS_TOKEN": str(token),
        "CW_CHAOS_RUNTIME": "3s",
        "CW_CHAOS_BATCH": "10",
    }
    requests = [
        RunRequest("chaos-fanout", W0 + timedelta(minutes=i), payload={"items": 3, "delay": 0.01})
        for i in range(HANDOVER_WINDOWS)
    ]
    for request in requests:  # queued before the worker starts: its first receive takes all
        trial.publish(request)
    trial.start_workers(1, **env)
    poll(lambda: _crash_time(token), deadline=60, what="crash after a hand-over")
    trial.start_worker(**{k: v for k, v in env.items() if k != "CW_CHAOS_CRASH"})
    trial.wait_terminal([r.run_key for r in requests], deadline=120)
    handed = requests[1].run_key  # claimed by the first window's completion, never run there
    assert len(trial.takeover_times(handed)) >= 2, "the handed claim was not taken over"
    return trial.verdict(Expect({r.run_key: items(3) for r in requests}))


def test_sigkill_after_a_lock_handover(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """Each completion of a batch claims the next window in its commit; a worker SIGKILLed
    right after such a commit leaves a claimed window that nobody runs until its lease runs
    out. Nothing may be lost or run twice, and the batch's other windows still run."""
    trial = Trial(stack, tmp_path / "t0", margin=0.5)
    try:
        verdict = _handover_kill(trial)
    finally:
        trial.close()
    record(
        results,
        "SIGKILL after a lock hand-over",
        stack,
        [verdict],
        notes=f"{HANDOVER_WINDOWS} windows in one receive of 10; killed right after the first "
        "completion that claimed the next window; a second worker takes it over",
    )
    assert_clean([verdict])


# -- 3. paused owner ---------------------------------------------------------------------------
def _paused(trial: Trial, after: int) -> tuple[Verdict, float]:
    env = {"CW_CHAOS_RUNTIME": "3s"}
    (first,) = trial.start_workers(1, **env)
    request = RunRequest("chaos-fanout", W0, payload={"items": 30, "delay": 0.05})
    trial.publish(request)
    poll(lambda: _effects(trial) >= after, deadline=60, what="first owner mid-run")
    first.signal(signal.SIGSTOP)
    paused = time.time()
    trial.start_worker(**env)
    trial.wait_terminal([request.run_key], deadline=120)
    fences = trial.takeover_times(request.run_key)
    first.signal(signal.SIGCONT)
    poll(
        lambda: b"lease.lost" in first.log.read_bytes(),
        deadline=60,
        what="the paused owner noticed it lost the lease",
    )
    return trial.verdict(Expect({request.run_key: items(30)})), fences[max(fences)] - paused


@full
def test_paused_owner(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """SIGSTOP the owner past its lease; another worker takes over; SIGCONT the first."""
    verdicts, detection = [], []
    for t in range(2):
        trial = Trial(stack, tmp_path / f"t{t}", margin=0.5)
        try:
            verdict, detected = _paused(trial, 6 + 5 * t)
        finally:
            trial.close()
        verdicts.append(verdict)
        detection.append(detected)
    record(
        results,
        "paused owner (SIGSTOP)",
        stack,
        verdicts,
        detection=detection,
        notes="detection = SIGSTOP → takeover claim accepted; after SIGCONT the old owner must "
        "log lease.lost, act no more and have no write accepted",
    )
    assert_clean(verdicts)


# -- 4. poison job -----------------------------------------------------------------------------
def _poison(trial: Trial) -> tuple[Verdict, float]:
    trial.start_workers(2)
    request = RunRequest("chaos-poison", W0)
    published = time.time()
    trial.publish(request)
    poll(lambda: trial.queue.dlq_depth() >= 1, deadline=90, what="dead letter")
    alerts = trial.watch()
    detected = time.time() - published
    kinds = {a.kind.value for a in alerts if a.firing}
    run = trial.run_record(request.run_key)
    before = trial.verdict(
        Expect(
            {request.run_key: None},
            may_dead_letter={request.run_key},
            dead_letters_expected=True,
        )
    )
    assert run["state"] == "dead_lettered", run
    assert {"dead_letters", "failing"} <= kinds, kinds
    (letter,) = trial.queue.dlq_peek(10)
    assert letter.reason == "MaxAttemptsExceeded" and letter.description, letter
    (trial.tmp / "fixed").touch()  # the fix is deployed
    assert trial.queue.redrive(10) == 1
    poll(
        lambda: trial.run_record(request.run_key).get("state") == "succeeded",
        deadline=60,
        what="redriven run succeeded",
    )
    after = trial.verdict(Expect({request.run_key: None}))
    after.violations += before.violations
    after.canary_leaks += before.canary_leaks
    after.losses += before.losses
    return after, detected


def test_poison_job_dead_lettered_alerted_redriven(
    stack: Stack, tmp_path: Path, results: list[Any]
) -> None:
    """Fails every time → retries with backoff → dead-lettered, visible (DLQ + alerts); after
    a fix, redrive runs it. Its error text and a log line carry secrets (the canary)."""
    verdicts, detection = [], []
    for t in range(2 if FULL else 1):
        trial = Trial(stack, tmp_path / f"t{t}", max_deliveries=5)
        try:
            verdict, detected = _poison(trial)
        finally:
            trial.close()
        verdicts.append(verdict)
        detection.append(detected)
    record(
        results,
        "poison job + redrive",
        stack,
        verdicts,
        detection=detection,
        notes="3 attempts, backoff 1 s then 2 s; detection = publish → in the DLQ with "
        "`dead_letters` and `failing` alerts raised; the exception text and a log line carry a "
        "registered token and a connection-string account key (secrets canary)",
    )
    assert_clean(verdicts)


# -- 5. store / broker outage ------------------------------------------------------------------
def _outage(trial: Trial, part: str, seconds: float) -> tuple[Verdict, float]:
    env = {"CW_CHAOS_RUNTIME": "4s"}
    trial.start_workers(2, **env)
    request = RunRequest("chaos-fanout", W0, payload={"items": 30, "delay": 0.05})
    trial.publish(request)
    poll(lambda: _effects(trial) >= 5, deadline=60, what="run under way")
    with trial.stack.outage(part, trial.spec):
        time.sleep(seconds)  # injection: the outage lasts this long
    restored = time.time()
    after = RunRequest("chaos-once", W0)  # the next request, published once it is back
    trial.publish(after)
    trial.wait_terminal([request.run_key, after.run_key], deadline=180)
    expect = Expect({request.run_key: items(30), after.run_key: None})
    return trial.verdict(expect), time.time() - restored


@full
@pytest.mark.parametrize("part", ["store", "broker"])
def test_outage(stack: Stack, part: str, tmp_path: Path, results: list[Any]) -> None:
    """The store (or the broker) goes away mid-run and comes back."""
    trial = Trial(stack, tmp_path / "t0", margin=1.0)
    try:
        verdict, recovered = _outage(trial, part, 6.0)
    finally:
        trial.close()
    how = (
        "an EXCLUSIVE lock held on the SQLite file for 6 s (renaming / chmod-ing it does not "
        "affect connections already open)"
        if stack.name == "local"
        else "the emulator's process group frozen (SIGSTOP) for 6 s, then SIGCONT (a restart "
        "of an in-memory emulator would wipe it: a disaster, not an outage)"
    )
    record(
        results,
        f"{part} outage",
        stack,
        [verdict],
        detection=[recovered],
        notes=f"{how}; lease = 4 s + 1 s margin; detection = outage end → the interrupted run "
        "and a request published after the outage both finished",
    )
    assert_clean([verdict])


# -- 6. malformed input ------------------------------------------------------------------------
def _malformed_bodies(n: int) -> list[bytes]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    junk_types = st.one_of(
        st.none(), st.integers(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=3)
    )
    shaped = st.fixed_dictionaries(
        {
            "v": st.one_of(st.just(1), junk_types),
            "job": st.one_of(st.sampled_from(["chaos-once", "no-such-job", ""]), junk_types),
            "window": st.one_of(
                st.sampled_from(["2026-01-20T02:00:30Z", "yesterday", "2026-13-45T99:99Z"]),
                junk_types,
            ),
            "payload": st.one_of(st.dictionaries(st.text(max_size=5), st.integers()), junk_types),
        }
    ).map(lambda d: json.dumps(d).encode())
    odd_text = st.text(
        st.characters(blacklist_categories=("Cs",), min_codepoint=0), min_size=1, max_size=80
    ).map(lambda t: t.encode("utf-8"))
    unknown_job = st.text(min_size=1, max_size=40).map(
        lambda name: (
            RunRequest("chaos-once", W0)
            .to_json()
            .replace(b'"chaos-once"', json.dumps(name).encode())
        )
    )
    body = st.one_of(st.binary(min_size=1, max_size=300), odd_text, shaped, unknown_job)
    out: list[bytes] = []

    @settings(
        max_examples=n,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(body)
    def collect(raw: bytes) -> None:
        out.append(raw)

    collect()
    huge = RunRequest("chaos-once", W0, payload={"blob": "x" * (70 * 1024)}).to_json()
    out += [huge, b"\x00\xff\xfe" * 50, "\u202e\u0000\U0001f4a3 {".encode()]
    return [raw for raw in dict.fromkeys(out) if not _valid(raw)]


def _valid(raw: bytes) -> bool:
    from cronwarden.model.errors import MalformedRunRequest

    try:
        request = RunRequest.from_json(raw)
    except MalformedRunRequest:
        return False
    job = JOBS.get(request.job)
    return job is not None and job.schedule.floor(request.window) == request.window


def _malformed(trial: Trial, n: int) -> tuple[Verdict, int]:
    bodies = _malformed_bodies(n)
    trial.start_workers(2)
    valid = [RunRequest("chaos-once", W0 + timedelta(minutes=i)) for i in range(3)]
    third = max(1, len(bodies) // 3)
    for i, raw in enumerate(bodies):
        if i % third == 0 and i // third < len(valid):
            trial.publish(valid[i // third])  # valid requests between the junk
        trial.queue.publish(raw, attributes={"fuzz": str(i)})
    keys = [r.run_key for r in valid]
    trial.wait_terminal(keys, deadline=120)
    with contextlib.suppress(AssertionError):  # counted below
        poll(lambda: trial.queue.dlq_depth() >= len(bodies), deadline=120, what="dead letters")
    letters = trial.queue.dlq_peek(len(bodies) + 10)
    verdict = trial.verdict(Expect(dict.fromkeys(keys), dead_letters_expected=True))
    missing = len(bodies) - len(letters)
    if missing:
        verdict.losses += missing
        verdict.violations.append(f"{missing} malformed message(s) not dead-lettered")
    unexplained = [dl for dl in letters if not (dl.reason and dl.description)]
    if unexplained:
        verdict.violations.append(f"{len(unexplained)} dead letter(s) without a reason")
    alive = [p for p in trial.workers if p.alive()]
    if len(alive) != len(trial.workers):
        verdict.violations.append("a worker died on malformed input")
    return verdict, len(bodies)


def test_malformed_input_fuzz(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """Fuzzed bodies (bad JSON, wrong types, unknown jobs, huge, binary, odd unicode) are all
    dead-lettered with a reason, while valid requests around them still run."""
    trial = Trial(stack, tmp_path / "t0")
    try:
        verdict, count = _malformed(trial, 60 if FULL else 8)
    finally:
        trial.close()
    record(
        results,
        "malformed input (fuzz)",
        stack,
        [verdict],
        notes=f"{count} hypothesis-generated malformed bodies + 3 valid requests; every "
        "malformed one must be in the DLQ with a reason and description, workers alive",
    )
    assert_clean([verdict])


# -- 7. clock skew -----------------------------------------------------------------------------
def _skew(
    trial: Trial,
    *,
    pause: bool,
    n: int = 40,
    delay: float = 0.05,
    batch: int = 5,
    runtime: str = "3s",
    marks_with_batches: bool = False,
) -> Verdict:
    """Owner A's clock runs 30 s slow, B's 30 s fast (60 s apart). With ``pause``, A is
    SIGSTOPped mid-run and B takes the run over; else B tries while A is healthy."""
    env = {"CW_CHAOS_RUNTIME": runtime}
    (first,) = trial.start_workers(1, CW_CHAOS_SKEW="-30", **env)
    payload: dict[str, Any] = {"items": n, "delay": delay, "batch": batch}
    if marks_with_batches:
        payload["marks"] = "batch"
    request = RunRequest("chaos-fanout", W0, payload=payload)
    trial.publish(request)
    poll(lambda: _effects(trial) >= 6, deadline=60, what="A mid-run")
    if pause:
        first.signal(signal.SIGSTOP)
    trial.start_workers(1, CW_CHAOS_SKEW="30", **env)
    trial.publish(request)  # B gets a copy of the request
    trial.wait_terminal([request.run_key], deadline=120)
    if pause:
        first.signal(signal.SIGCONT)
    poll(
        lambda: (
            b"lease.lost" in first.log.read_bytes()
            or b"run.completed" in first.log.read_bytes()
            or b"run.failed" in first.log.read_bytes()
        ),
        deadline=60,
        what="A finished its attempt",
    )
    return trial.verdict(Expect({request.run_key: items(n)}))


@full
def test_clock_skew(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """Workers 60 s apart (±30 s) with the default lease margin (60 s)."""
    verdicts = []
    for t, pause in enumerate((True, False)):
        trial = Trial(stack, tmp_path / f"t{t}", margin=60.0)
        try:
            verdicts.append(_skew(trial, pause=pause))
        finally:
            trial.close()
    record(
        results,
        "clock skew ±30 s",
        stack,
        verdicts,
        notes="default lease margin (60 s) = the workers' relative skew; trial 1: the slow-clock "
        "owner is SIGSTOPped and the fast-clock worker takes over, then the owner resumes "
        "(before the lease-deadline fix it went on acting: 4 side effects ~2 s after the "
        "takeover); trial 2: the fast-clock worker gets a copy while the owner is healthy",
    )
    assert_clean(verdicts)


@full
def test_clock_skew_margin_too_small_is_caught(
    stack: Stack, tmp_path: Path, results: list[Any]
) -> None:
    """Control: a lease margin (20 s) below the skew (60 s) must be *caught* by the checker."""
    trial = Trial(stack, tmp_path / "t0", margin=20.0)
    try:
        # A still busy when B (a new process: seconds to start) takes over: 40 items of 0.3 s
        # against a 10 s max runtime; all in one batch with its done marks held until the
        # batch ends (``flush_every=None``), so after B's takeover A writes nothing and only
        # its own clock could stop it (with a write refused in between, whether A acted first
        # was down to timing, and so was A's deadline at 3 s). With the default marks A's next
        # mark is refused at once: the default makes a too-small margin harder to hit.
        verdict = _skew(
            trial, pause=False, n=40, delay=0.3, batch=40, runtime="10s", marks_with_batches=True
        )
    finally:
        trial.close()
    record(
        results,
        "clock skew ±30 s, margin 20 s (control)",
        stack,
        [verdict],
        notes="negative control: the harness must report two live owners here",
        extra={"result": "caught (expected)" if verdict.live_owner_overlaps else "**MISSED**"},
    )
    assert verdict.live_owner_overlaps > 0, "the checker missed a premature takeover"


# -- 8. scheduler double fire ------------------------------------------------------------------
def _double_fire(trial: Trial) -> Verdict:
    trial.start_workers(2)
    trigger = Trigger(JOBS, trial.queue, trial.store)
    fired = W0 + timedelta(seconds=2)
    trigger.tick("chaos-once", fired)
    Trigger(JOBS, trial.queue, trial.store).tick("chaos-once", fired)  # a second scheduler
    trigger.tick("chaos-once", fired + timedelta(seconds=40))  # a late retry of the same fire
    key = RunRequest("chaos-once", W0).run_key
    trial.wait_terminal([key], deadline=60)
    if not getattr(trial.queue, "deduplicates", True):
        poll(
            lambda: _status(trial, "chaos-once").get("duplicates", 0) >= 2,
            deadline=60,
            what="copies settled",
        )
    return trial.verdict(Expect({key: None}))


def test_scheduler_double_fire(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    trial = Trial(stack, tmp_path / "t0")
    try:
        verdict = _double_fire(trial)
    finally:
        trial.close()
    record(
        results,
        "scheduler double fire",
        stack,
        [verdict],
        notes="three fires of one window (two schedulers, one late retry); brokers with "
        "duplicate detection drop the copies, Pub/Sub delivers them and the claim dedupes",
    )
    assert_clean([verdict])


# -- 9. missed fires + catch-up ----------------------------------------------------------------
def _catch_up(trial: Trial) -> tuple[Verdict, int]:
    trial.start_workers(2)
    now = W0 + timedelta(minutes=25)
    requests = Trigger(JOBS, trial.queue, trial.store).tick("chaos-catchup", now)
    keys = [r.run_key for r in requests]
    trial.wait_terminal(keys, deadline=120)
    claims = {k: min(trial.takeover_times(k).values()) for k in keys}
    ordered = sorted(keys)  # window text sorts by time
    inversions = sum(
        1 for i, a in enumerate(ordered) for b in ordered[i + 1 :] if claims[b] < claims[a]
    )
    return trial.verdict(Expect(dict.fromkeys(keys))), inversions


@full
def test_missed_fires_catch_up(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    """The scheduler was down for an hour; one fire enqueues the missed windows oldest first."""
    trial = Trial(stack, tmp_path / "t0")
    try:
        verdict, inversions = _catch_up(trial)
    finally:
        trial.close()
    record(
        results,
        "missed fires + catch-up",
        stack,
        [verdict],
        notes="the scheduler was down for an hour: one fire enqueues the 12 missed windows "
        "(oldest first, `CatchUp.oldest_first('1h', 12)`) and the current one; 2 workers; "
        "order inversions = pairs of windows where the newer one was claimed first",
        extra={"order_inversions": inversions},
    )
    assert_clean([verdict])
