"""Cases 1-4 of issue 13 across real OS processes on one SQLite state file: each attempt of
the run is its own process (faults injected in it by ``FaultyStore``), the next attempt another.
Side effects are counted per item: done items are never repeated, no item is lost."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cronwarden.adapters.local import SQLiteStore
from cronwarden.model.ports import ITEM
from cronwarden.run.ledger import read_items

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
WINDOW = "2026-01-20T02:00Z"


def attempt(tmp_path: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.ledger.proc_worker",
            "--db",
            str(tmp_path / "state.db"),
            "--effects",
            str(tmp_path / "fx.jsonl"),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no outcome (rc={proc.returncode}):\n{proc.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    result["lease_lost"] = '"lease.lost"' in proc.stderr
    return result


def effects(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "fx.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def states(tmp_path: Path) -> dict[str, str]:
    store = SQLiteStore(str(tmp_path / "state.db"))
    try:
        found = read_items(store.query(ITEM, "fan"))
        return {key: view.item.state for key, view in found.items()}
    finally:
        store.close()


def test_case1_unavailable_batch_commit_in_one_process_retry_in_another(tmp_path: Path) -> None:
    first = attempt(
        tmp_path, "--case", "fan", "--fault", "unavailable", "--times", "1000", "--retry", "0.2"
    )
    assert first["kind"] == "failed" and first["reason"] == "StoreUnavailable", first
    assert states(tmp_path) == {
        **{f"i{n}": "done" for n in range(5)},
        **{f"i{n}": "released" for n in range(5, 10)},
    }
    second = attempt(tmp_path, "--case", "fan")
    assert second["kind"] == "succeeded", second
    done = effects(tmp_path)
    assert Counter(e["key"] for e in done) == Counter(f"i{n}" for n in range(10))
    assert not any(e["uncertain"] for e in done)


@pytest.mark.parametrize("fault", ["unknown-after", "unknown-before"])
def test_case2_unknown_outcome_batch_commit(tmp_path: Path, fault: str) -> None:
    result = attempt(tmp_path, "--case", "fan", "--fault", fault, "--quarantine")
    assert result["kind"] == "succeeded" and result["reason"] == "", result
    assert result["injected"] == 1 and not result["lease_lost"]
    assert Counter(e["key"] for e in effects(tmp_path)) == Counter(f"i{n}" for n in range(10))
    assert set(states(tmp_path).values()) == {"done"}


def test_case3_two_loops_release_their_own_unstarted_items(tmp_path: Path) -> None:
    first = attempt(tmp_path, "--case", "loops", "--raise-at", "b3", "--quarantine")
    assert first["kind"] == "failed", first
    pending = sorted(k for k, s in states(tmp_path).items() if s == "pending")
    assert pending == ["a2", "b3"]  # started: broken out of / raised; the rest released
    second = attempt(tmp_path, "--case", "loops", "--quarantine")
    assert second["kind"] == "succeeded" and second["reason"] == "quarantined", second
    assert "a2, b3" in second["detail"]
    counts = Counter(e["key"] for e in effects(tmp_path))
    expected = Counter([f"a{n}" for n in range(10)] + [f"b{n}" for n in range(10) if n != 3])
    assert counts == expected  # every never-yielded item done once, none quarantined


@pytest.mark.parametrize("fault", ["unknown-after", "unknown-before"])
def test_case4_renewal_with_a_lost_reply_keeps_the_lease(tmp_path: Path, fault: str) -> None:
    result = attempt(tmp_path, "--case", "renew", "--fault", fault, "--on", "renewal")
    assert result["kind"] == "succeeded" and not result["lease_lost"], result
    assert result["injected"] == 1
    (done,) = effects(tmp_path)
    assert done["key"] == "renewals=2"
