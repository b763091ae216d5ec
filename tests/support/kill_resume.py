"""The SIGKILL-mid-run scenario shared by the hosts that run as OS processes (the Azure app host,
the GCP pull worker): a fan-out job (``tests/*/kill_jobs.py``) over 30 ledger items in batches
of 5 is killed after 12 items, and a second process must resume it from its checkpoint and
ledger, redoing at most the batch in flight at the kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cronwarden import JobSet, RunRequest, Trigger
from cronwarden.model.ports import RUN, Key, Publisher, Store
from cronwarden.run.ledger import item_records

from .procs import ROOT, Proc, effects, poll, reaping

WINDOW = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)
RUN_KEY = Key(RUN, "fanout", "2026-01-20T02:00Z")
ITEMS, BATCH = 30, 5


def job_env(effects_db: Path) -> dict[str, str]:
    """The fan-out job's settings (``kill_jobs``): where effects go, items, batch, pace."""
    return {
        "CW_TEST_EFFECTS": str(effects_db),
        "CW_TEST_ITEMS": str(ITEMS),
        "CW_TEST_BATCH": str(BATCH),
        "CW_TEST_ITEM_DELAY": "0.05",
        "CW_TEST_RUNTIME": "6s",  # the resumed attempt must finish inside one lease under load
    }


def start_module(module: str, args: list[str], env: dict[str, str], log: Path) -> Proc:
    """``python -m module *args`` in its own process group (killed by pgid), stderr to ``log``."""
    with open(log, "ab") as sink:
        popen = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=sink,
            text=True,
            start_new_session=True,  # its own process group: killed by pgid
        )
    return Proc(popen)


def kill_and_resume(
    start: Callable[[Path], Proc],
    tmp_path: Path,
    jobs_module: Any,
    publisher: Publisher,
    store: Store,
) -> tuple[dict[str, Any], int, int | None]:
    """Publish the fan-out run, SIGKILL the first process after 12 items, start a second one,
    wait for the run to succeed and stop it with SIGTERM.

    Returns the final run record, how many item effects were recorded by the kill, and the
    second process's exit code.
    """

    def run() -> dict[str, Any]:
        found = store.get(RUN_KEY)
        return dict(found.data) if found else {}

    fx = tmp_path / "fx.db"
    with reaping([start(tmp_path / "a.log")]) as procs:
        Trigger(JobSet.from_module(jobs_module), publisher).publish(RunRequest("fanout", WINDOW))
        poll(lambda: len(effects(fx, "item")) >= 12, what="12 items processed")
        procs[0].signal(signal.SIGKILL)
        procs[0].popen.wait(timeout=10)
        killed_after = len(effects(fx, "item"))
        second = start(tmp_path / "b.log")
        procs.append(second)
        poll(lambda: run().get("state") == "succeeded", deadline=60, what="resumed run")
        second.signal(signal.SIGTERM)
        code = second.popen.wait(timeout=30)
    return run(), killed_after, code


def assert_resumed_once(
    final: dict[str, Any], killed_after: int, effects_db: Path, store: Store
) -> list[dict[str, Any]]:
    """The second attempt finished the run: nothing lost, at most one batch redone (and marked
    uncertain), every ledger item done. Returns the item effects."""
    assert final["fence"] == 2 and final["attempt"] == 2, final
    assert len(effects(effects_db, "prepare")) == 1  # the checkpoint carried over
    items = effects(effects_db, "item")
    per_item = Counter(e["item"] for e in items)
    assert sorted(per_item, key=int) == [str(i) for i in range(ITEMS)]  # nothing lost
    redone = {k for k, n in per_item.items() if n > 1}
    assert len(redone) <= BATCH  # only the batch pending at the kill is uncertain
    resumed = {e["run_id"] for e in items} - {e["run_id"] for e in items[:killed_after]}
    assert resumed == {final["run_id"]}
    assert all(e["uncertain"] for e in items if e["item"] in redone and e["run_id"] in resumed)
    ledger = item_records(store, "fanout", "2026-01-20T02:00Z")
    assert len(ledger) == ITEMS and all(r.data["state"] == "done" for r in ledger)
    return items
