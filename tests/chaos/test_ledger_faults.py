"""Chaos scenarios of the ledger's store failures (issue 13), on every provider stack:

* **store unavailable on a ledger commit**: batch commits refused before applying; once retried
  inside the run (the lease's retry budget), once past that budget (the run fails, its done
  marks ride on the failure commit, the retry does the rest);
* **ledger commit of unknown outcome**: batch commits that land but report an error, then ones
  that do not land and report the same: settled by reading back the write id.

The promise checked: repeated done items 0, items never done 0 (and no lease lost: the owner
is never fenced out by its own landed writes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronwarden import RunRequest

from .checker import Expect, Verdict
from .runner import Trial
from .stacks import Stack
from .test_scenarios import W0, assert_clean, items, record

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
ITEMS = 30


def _count(trial: Trial, event: bytes) -> int:
    return sum(w.log.read_bytes().count(b'"event": "' + event + b'"') for w in trial.workers)


def _trial(trial: Trial, **env: str) -> tuple[Verdict, dict[str, int]]:
    trial.start_workers(2, CW_CHAOS_RUNTIME="15s", **env)  # a cold emulator claim can take 7 s
    request = RunRequest("chaos-fanout", W0, payload={"items": ITEMS, "delay": 0.01})
    trial.publish(request)
    trial.wait_terminal([request.run_key], deadline=180)
    verdict = trial.verdict(Expect({request.run_key: items(ITEMS)}))
    seen = {
        "leases_lost": _count(trial, b"lease.lost"),
        "writes_resent": _count(trial, b"store.retry"),
        "unknown_read_back": _count(trial, b"store.unknown_resolved"),
        "runs_failed": _count(trial, b"run.failed"),
    }
    return verdict, seen


def _scenario(
    stack: Stack, tmp_path: Path, results: list[Any], name: str, envs: list[dict[str, str]]
) -> None:
    verdicts: list[Verdict] = []
    seen: dict[str, int] = {}
    for t, env in enumerate(envs):
        trial = Trial(stack, tmp_path / f"t{t}", margin=1.0)
        try:
            verdict, counts = _trial(trial, **env)
        finally:
            trial.close()
        verdicts.append(verdict)
        for event, value in counts.items():
            seen[event] = seen.get(event, 0) + value
    record(
        results,
        name,
        stack,
        verdicts,
        notes="; ".join(
            f"trial {t}: {env['CW_CHAOS_LEDGER_FAULT']} x{env['CW_CHAOS_FAULT_TIMES']} per "
            f"worker, retry budget {env['CW_CHAOS_STORE_RETRY']} s"
            for t, env in enumerate(envs)
        )
        + f"; {ITEMS} items in batches of 5, 2 workers, lease 15 s + 1 s margin",
        extra=seen,
    )
    assert_clean(verdicts)
    assert seen["leases_lost"] == 0, f"{seen['leases_lost']} lease(s) lost to store failures"
    assert seen["writes_resent"] + seen["unknown_read_back"] > 0, "no fault was injected"
    for verdict in verdicts:
        assert verdict.duplicates == 0 and verdict.losses == 0


def test_store_unavailable_on_a_ledger_commit(
    stack: Stack, tmp_path: Path, results: list[Any]
) -> None:
    _scenario(
        stack,
        tmp_path,
        results,
        "store unavailable on a ledger commit",
        [
            {
                "CW_CHAOS_LEDGER_FAULT": "unavailable",
                "CW_CHAOS_FAULT_TIMES": "3",
                "CW_CHAOS_STORE_RETRY": "30",
            },
            {
                "CW_CHAOS_LEDGER_FAULT": "unavailable",
                "CW_CHAOS_FAULT_TIMES": "8",
                "CW_CHAOS_STORE_RETRY": "0.1",
            },
        ],
    )


def test_ledger_commit_of_unknown_outcome(stack: Stack, tmp_path: Path, results: list[Any]) -> None:
    _scenario(
        stack,
        tmp_path,
        results,
        "ledger commit of unknown outcome",
        [
            {
                "CW_CHAOS_LEDGER_FAULT": "unknown",
                "CW_CHAOS_FAULT_TIMES": "3",
                "CW_CHAOS_STORE_RETRY": "30",
            }
        ],
    )
