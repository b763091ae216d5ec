"""A consumer storm: 50 copies of one event published by 8 OS processes onto one shared local
queue (its deduplication bypassed, as on Pub/Sub) and worked by those 8 processes against one
shared SQLite store: exactly one run of the run key; every other delivery is a duplicate or
was postponed while the run was in progress, and none is lost or dead-lettered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from cronwarden.adapters.local import SQLiteQueue, SQLiteStore
from cronwarden.model.records import run_key_of

PROCESSES, COPIES = 8, 50
ROOT = Path(__file__).resolve().parents[2]


def test_fifty_copies_in_eight_processes_run_once(tmp_path: Path) -> None:
    shares = [COPIES // PROCESSES + (1 if i < COPIES % PROCESSES else 0) for i in range(PROCESSES)]
    SQLiteStore(str(tmp_path / "state.db")).close()  # create the schemas once, up front
    SQLiteQueue(str(tmp_path / "queue.db")).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.events.storm", str(tmp_path), str(i), str(n)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,
        )
        for i, n in enumerate(shares)
    ]
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("ready.*"))) < PROCESSES:
            assert time.monotonic() < deadline, "the storm processes did not start"
            assert all(p.poll() is None for p in procs), "a storm process died at start"
            time.sleep(0.05)
        (tmp_path / "go").touch()
        codes = [p.wait(timeout=90) for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
    assert codes == [0] * PROCESSES
    lines = (tmp_path / "runs.log").read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" invoice-render:e:inv-storm 42")
    seen: Counter[str] = Counter()
    for i in range(PROCESSES):
        seen.update(json.loads((tmp_path / f"outcomes.{i}.json").read_text()))
    assert seen["succeeded"] == 1
    assert set(seen) <= {"succeeded", "duplicate", "in_progress"}
    assert seen["succeeded"] + seen["duplicate"] == COPIES  # postponed copies came back
    store = SQLiteStore(str(tmp_path / "state.db"))
    queue = SQLiteQueue(str(tmp_path / "queue.db"))
    try:
        record = store.get(run_key_of("invoice-render", "e:inv-storm"))
        assert record is not None and record.data["state"] == "succeeded"
        assert record.data["attempt"] == 1
        assert queue.dlq_depth() == 0 and not queue.holds("invoice-render:e:inv-storm")
    finally:
        store.close()
        queue.close()
