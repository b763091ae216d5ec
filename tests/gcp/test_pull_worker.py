"""The pull worker (``python -m cronwarden.adapters.gcp.serve``) as real OS processes on the
emulators: SIGKILL mid-run, then another worker resumes on Firestore after the lease expires,
each ledger item's effect once apart from the batch in flight at the kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cronwarden import JobSet, RunRequest, Trigger
from cronwarden.adapters.gcp import FirestoreStore, PubSubQueue
from cronwarden.emulators.gcp import FirestoreEmulator, PubSubEmulator
from cronwarden.ports import ITEM, RUN, Key
from tests.support.procs import ROOT, Proc, effects, poll, reaping

from . import kill_jobs
from .conftest import fresh_project
from .hosting import gcp_env

pytestmark = [pytest.mark.gcp, pytest.mark.slow]
WINDOW = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


def start_pull_worker(env: dict[str, str], log: Path) -> Proc:
    argv = [
        sys.executable,
        "-m",
        "cronwarden.adapters.gcp.serve",
        "--jobs",
        "tests.gcp.kill_jobs",
        "--lease-margin",
        "0.3",
    ]
    with open(log, "ab") as sink:
        popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=sink,
            text=True,
            start_new_session=True,  # its own process group: killed by pgid
        )
    return Proc(popen)


def test_sigkill_mid_run_resumes_on_another_pull_worker(
    tmp_path: Path, pubsub_emulator: PubSubEmulator, firestore_emulator: FirestoreEmulator
) -> None:
    project = fresh_project()
    fx = tmp_path / "fx.db"
    env = {
        **gcp_env(project, pubsub_emulator, firestore_emulator),
        "CW_TEST_EFFECTS": str(fx),
        "CW_TEST_ITEMS": "30",
        "CW_TEST_BATCH": "5",
        "CW_TEST_ITEM_DELAY": "0.05",
        "CW_TEST_RUNTIME": "6s",  # under load, the first attempt must reach the kill in time
    }
    queue = PubSubQueue(
        project,
        env["CRONWARDEN_GCP_TOPIC"],
        env["CRONWARDEN_GCP_SUBSCRIPTION"],
        dead_letter_topic=env["CRONWARDEN_GCP_DEAD_LETTER_TOPIC"],
        dead_letter_subscription=env["CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION"],
        ack_deadline=30,
        retry_backoff=(0.0, 1.0),
        emulator_host=pubsub_emulator.address,
        create_missing=True,
    )
    store = FirestoreStore(project, emulator_host=firestore_emulator.address)
    run_key = Key(RUN, "fanout", "2026-01-20T02:00Z")

    def run() -> dict[str, Any]:
        found = store.get(run_key)
        return dict(found.data) if found else {}

    try:
        queue.ensure_resources()
        with reaping([start_pull_worker(env, tmp_path / "a.log")]) as procs:
            Trigger(JobSet.from_module(kill_jobs), queue).publish(RunRequest("fanout", WINDOW))
            poll(lambda: len(effects(fx, "item")) >= 12, what="12 items processed")
            procs[0].signal(signal.SIGKILL)
            procs[0].popen.wait(timeout=10)
            killed_after = len(effects(fx, "item"))
            second = start_pull_worker(env, tmp_path / "b.log")
            procs.append(second)
            poll(lambda: run().get("state") == "succeeded", deadline=60, what="resumed run")
            second.signal(signal.SIGTERM)
            assert second.popen.wait(timeout=30) is not None
        final = run()
        assert final["fence"] == 2 and final["attempt"] == 2, final
        assert len(effects(fx, "prepare")) == 1  # the checkpoint carried over
        items = effects(fx, "item")
        per_item = Counter(e["item"] for e in items)
        assert sorted(per_item, key=int) == [str(i) for i in range(30)]  # nothing lost
        redone = {k for k, n in per_item.items() if n > 1}
        assert len(redone) <= 5  # only the batch pending at the kill is uncertain
        resumed = {e["run_id"] for e in items} - {e["run_id"] for e in items[:killed_after]}
        assert resumed == {final["run_id"]}
        assert all(e["uncertain"] for e in items if e["item"] in redone and e["run_id"] in resumed)
        idems: dict[str, str] = {}
        for e in items:
            assert idems.setdefault(e["item"], e["idem"]) == e["idem"]
        ledger = store.query(ITEM, "fanout", prefix="2026-01-20T02:00Z/")
        assert len(ledger) == 30 and all(r.data["state"] == "done" for r in ledger)
        assert queue.dlq_depth() == 0
        assert not queue.receive(1, wait=0.5)  # the delivery was acknowledged
    finally:
        queue.close()
        store.close()
