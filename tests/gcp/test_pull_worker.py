"""The pull worker (``python -m cronwarden.adapters.gcp.serve``) as real OS processes on the
emulators: SIGKILL mid-run, then another worker resumes on Firestore after the lease expires,
each ledger item's effect once apart from the batch in flight at the kill."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwarden.adapters.gcp import FirestoreStore, PubSubQueue
from cronwarden.emulators.gcp import FirestoreEmulator, PubSubEmulator
from tests.support.kill_resume import assert_resumed_once, job_env, kill_and_resume, start_module
from tests.support.procs import Proc

from . import kill_jobs
from .conftest import fresh_project
from .hosting import gcp_env

pytestmark = [pytest.mark.gcp, pytest.mark.slow]


def start_pull_worker(env: dict[str, str], log: Path) -> Proc:
    args = ["--jobs", "tests.gcp.kill_jobs", "--lease-margin", "0.3"]
    return start_module("cronwarden.adapters.gcp.serve", args, env, log)


def test_sigkill_mid_run_resumes_on_another_pull_worker(
    tmp_path: Path, pubsub_emulator: PubSubEmulator, firestore_emulator: FirestoreEmulator
) -> None:
    project = fresh_project()
    fx = tmp_path / "fx.db"
    env = {
        **gcp_env(project, pubsub_emulator, firestore_emulator),
        **job_env(fx),
        "CW_TEST_RUNTIME": "6s",
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
    try:
        queue.ensure_resources()
        final, killed_after, code = kill_and_resume(
            lambda log: start_pull_worker(env, log), tmp_path, kill_jobs, queue, store
        )
        assert code is not None
        items = assert_resumed_once(final, killed_after, fx, store)
        idems: dict[str, str] = {}
        for e in items:
            assert idems.setdefault(e["item"], e["idem"]) == e["idem"]
        assert queue.dlq_depth() == 0
        assert not queue.receive(1, wait=0.5)  # the delivery was acknowledged
    finally:
        queue.close()
        store.close()
