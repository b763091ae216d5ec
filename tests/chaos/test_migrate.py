"""[migrate] A live switch between providers under faults (the switch of
``tests/migrate/scenario.py``: both sides firing throughout, a half-done ledger, a dead letter,
a pause), with every trigger publishing each window twice, and:

* **killed at every step**: the migration is SIGKILLed just after each line it prints (each line
  follows a durable step: a fence, an open, a job done) and started again, until a run finishes
  by itself;
* **store faults**: the migration's stores on both sides fail on purpose
  (:class:`cronwarden.testing.FaultyStore`): commits refused before applying, commits that
  land and report an error (outcome unknown), reads refused; each failure ends the run, which is
  started again until it finishes.

Either way: 0 windows run twice, 0 lost, 0 ledger items marked done run again (the figures go
to the chaos report). The fast subset runs local -> local; ``nox -s chaos`` adds Postgres and
the GCP -> AWS pair.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cronwarden.jobs.config import load_jobs
from cronwarden.model.errors import StoreUnavailable
from cronwarden.ops.migrate import Migration, Side
from cronwarden.testing.faults import UNAVAILABLE, UNKNOWN, Fault, FaultyStore, commits, reads
from tests.migrate.harness import JOBS_FILE, SideSpec, Stepper, cli_env, migrate_argv
from tests.migrate.scenario import switch, wait_steps
from tests.migrate.sides import aws_side, gcp_side, local_side, postgres_side

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
MAX_RUNS = 40


def killed_at_every_step(
    src: SideSpec, dst: SideSpec, folder: Path, effects_db: Path, stepper: Stepper
) -> int:
    """Run the migration, SIGKILL it after the first line that tells of a new step (a job
    moved by an earlier run is skipped), again and again until a run exits by itself with 0;
    returns how many runs were killed."""
    killed = 0
    seen: list[str] = []
    for _ in range(MAX_RUNS):
        proc = subprocess.Popen(
            migrate_argv(src, dst, folder),
            env=cli_env(effects_db),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        while "already moved" in first:
            first = proc.stdout.readline()
        seen.append(first.strip())
        if proc.poll() is None and not first.startswith("moved "):  # not the last line
            os.killpg(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait(timeout=30)
        if proc.returncode == 0:
            assert f"from {src.label} to {dst.label}" in first + rest, first + rest
            return killed
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, first, rest)
        killed = len(seen)
        wait_steps(stepper, 1)  # both sides fire between two runs
    raise AssertionError(f"the migration did not finish in {MAX_RUNS} runs: {seen}")


def under_store_faults(
    src: SideSpec, dst: SideSpec, folder: Path, effects_db: Path, stepper: Stepper, seed: int
) -> int:
    """Run the migration in this process on faulty stores until a run finishes; returns how
    many runs a fault ended."""
    rng = random.Random(seed)

    def plan() -> list[Fault]:
        return [
            *(Fault(UNKNOWN, after=True, match=commits, skip=rng.randint(0, 30)) for _ in range(3)),
            *(Fault(UNAVAILABLE, match=commits, skip=rng.randint(0, 30)) for _ in range(2)),
            Fault(UNAVAILABLE, match=reads, skip=rng.randint(0, 60)),
        ]

    src_provider, dst_provider = src.build(), dst.build()
    try:
        source = Side(src.label, FaultyStore(src_provider.store(), plan()), src_provider.queue())
        target = Side(dst.label, FaultyStore(dst_provider.store(), plan()), dst_provider.queue())
        jobs = list(load_jobs(JOBS_FILE))
        ended = 0
        for _ in range(MAX_RUNS):
            try:
                report = Migration(jobs, source, target, poll=0.05).run()
            except StoreUnavailable:  # CommitOutcomeUnknown included: a crash, run it again
                ended += 1
                wait_steps(stepper, 1)
                continue
            assert not report.problems, report.problems
            injected = len(source.store.injected) + len(target.store.injected)  # type: ignore[attr-defined]
            assert injected >= 3, "the faults never fired: the scenario tested nothing"
            return ended
        raise AssertionError(f"the migration did not finish in {MAX_RUNS} runs")
    finally:
        src_provider.close()
        dst_provider.close()


def _pairs(tmp: Path, request: pytest.FixtureRequest, pair: str) -> tuple[SideSpec, SideSpec]:
    if pair == "local->local":
        return local_side(tmp / "a", "a"), local_side(tmp / "b", "b")
    if pair == "local->postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("postgres_schema")
        return local_side(tmp / "a", "local"), postgres_side(dsn, schema)
    assert pair == "gcp->aws"
    gcp = gcp_side(
        request.getfixturevalue("firestore_emulator"), request.getfixturevalue("pubsub_emulator")
    )
    return gcp, aws_side(request.getfixturevalue("moto_server"))


PAIRS = [
    pytest.param("local->local"),
    pytest.param("local->postgres", marks=[pytest.mark.postgres, pytest.mark.chaos_full]),
    pytest.param("gcp->aws", marks=[pytest.mark.gcp, pytest.mark.aws, pytest.mark.chaos_full]),
]


@pytest.mark.parametrize("pair", PAIRS)
def test_migration_killed_at_every_step(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    results: list[dict[str, Any]],
    pair: str,
) -> None:
    src, dst = _pairs(tmp_path, request, pair)
    killed: list[int] = []
    started = time.monotonic()

    def move(s: SideSpec, d: SideSpec, folder: Path, fx: Path, stepper: Stepper) -> None:
        killed.append(killed_at_every_step(s, d, folder, fx, stepper))

    figures = switch(tmp_path, monkeypatch, src, dst, move, duplicates=True)
    assert killed and killed[0] >= 3, killed  # killed at several steps, not only once
    results.append(_row("migrate: killed at every step", pair, figures, started, killed[0]))


@pytest.mark.parametrize("pair", PAIRS)
def test_migration_under_store_faults(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    results: list[dict[str, Any]],
    pair: str,
) -> None:
    src, dst = _pairs(tmp_path, request, pair)
    ended: list[int] = []
    started = time.monotonic()

    def move(s: SideSpec, d: SideSpec, folder: Path, fx: Path, stepper: Stepper) -> None:
        ended.append(under_store_faults(s, d, folder, fx, stepper, seed=len(pair)))

    figures = switch(tmp_path, monkeypatch, src, dst, move, duplicates=True)
    assert ended and ended[0] >= 1, ended
    results.append(_row("migrate: store faults", pair, figures, started, ended[0]))


def _row(
    scenario: str, pair: str, figures: dict[str, int], started: float, interrupted: int
) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "order": 100,  # after the scenarios of test_scenarios
        "provider": pair,
        "trials": 1,
        "duplicates": figures["duplicates"],
        "losses": figures["losses"],
        "windows_unaccounted": figures["losses"],
        "result": "pass",
        "duration_s": time.monotonic() - started,
        "notes": (
            f"a live switch of {figures['windows']} windows per job, both sides firing each "
            f"window twice; the migration interrupted {interrupted} time(s) and run again"
        ),
    }
