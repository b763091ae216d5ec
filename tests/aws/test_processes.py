"""Real OS processes hosting the Lambda worker (``python -m cronwarden.emulators.aws``) on moto:
SIGKILL mid-run, the SQS visibility timeout runs out, another process receives the message and
resumes the run from its checkpoint and ledger."""

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
from cronwarden.adapters.aws import AwsProvider
from cronwarden.emulators.aws import MotoServer
from cronwarden.model.ports import RUN, Key
from cronwarden.run.ledger import item_records
from tests.support.procs import ROOT, Proc, effects, poll, reaping

from . import kill_jobs

pytestmark = [pytest.mark.aws, pytest.mark.slow]
WINDOW = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


def start_host(env: dict[str, str], log: Path) -> Proc:
    argv = [
        sys.executable,
        "-m",
        "cronwarden.emulators.aws",
        "--jobs",
        "tests.aws.kill_jobs",
        "--lease-margin",
        "0.3",
        "--visibility",
        "3",  # a killed worker's message comes back after 3 s (the queue's own is 60 s)
    ]
    with open(log, "ab") as sink:
        popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=sink,
            text=True,
            start_new_session=True,
        )
    return Proc(popen)


def test_sigkill_mid_run_resumes_in_another_lambda_process(
    tmp_path: Path, moto_server: MotoServer
) -> None:
    settings = moto_server.settings(max_receive_count=10)
    provider = AwsProvider(settings)
    store, queue = provider.store(), provider.queue()
    fx = tmp_path / "fx.db"
    env = {
        **moto_server.env(),
        **settings.to_env(),
        "CRONWARDEN_PROVIDER": "aws",
        "CW_TEST_EFFECTS": str(fx),
        "CW_TEST_ITEMS": "30",
        "CW_TEST_BATCH": "5",
        "CW_TEST_ITEM_DELAY": "0.05",
        "CW_TEST_RUNTIME": "6s",  # under load, the first attempt must reach the kill in time
    }
    run_key = Key(RUN, "fanout", "2026-01-20T02:00Z")

    def run() -> dict[str, Any]:
        found = store.get(run_key)
        return dict(found.data) if found else {}

    try:
        with reaping([start_host(env, tmp_path / "a.log")]) as procs:
            Trigger(JobSet.from_module(kill_jobs), queue).publish(RunRequest("fanout", WINDOW))
            poll(lambda: len(effects(fx, "item")) >= 12, deadline=60, what="12 items processed")
            procs[0].signal(signal.SIGKILL)
            procs[0].popen.wait(timeout=10)
            killed_after = len(effects(fx, "item"))
            second = start_host(env, tmp_path / "b.log")
            procs.append(second)
            poll(lambda: run().get("state") == "succeeded", deadline=90, what="resumed run")
            second.signal(signal.SIGTERM)
            assert second.popen.wait(timeout=30) == 0
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
        ledger = item_records(store, "fanout", "2026-01-20T02:00Z")
        assert len(ledger) == 30 and all(r.data["state"] == "done" for r in ledger)
        assert queue.dlq_depth() == 0
        assert not queue.receive(1, wait=1.0)  # every copy of the request was settled
    finally:
        provider.close()
