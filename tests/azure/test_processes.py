"""Real OS processes hosting the function app (``python -m cronwarden.adapters.azure.host``) on
Azurite + the Service Bus emulator: SIGKILL mid-run, the Service Bus lock expires, another host
process gets the message and resumes the run from its checkpoint and ledger."""

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
from cronwarden.adapters.azure import AzureProvider
from cronwarden.emulators.azurite import Azurite
from cronwarden.ports import ITEM, RUN, Key
from tests.support.procs import ROOT, Proc, effects, poll, reaping

from . import kill_jobs

pytestmark = [pytest.mark.azure, pytest.mark.slow]
WINDOW = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


def start_host(env: dict[str, str], log: Path) -> Proc:
    argv = [
        sys.executable,
        "-m",
        "cronwarden.adapters.azure.host",
        "--jobs",
        "tests.azure.kill_jobs",
        "--no-timers",
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


def test_sigkill_mid_run_resumes_on_another_host_process(
    tmp_path: Path, azurite: Azurite, azurite_table: str, servicebus_emulator: Any
) -> None:
    queue_name = servicebus_emulator.create_queue(
        max_delivery_count=10, lock_duration=2.0, requires_duplicate_detection=True
    )
    fx = tmp_path / "fx.db"
    env = {
        "CRONWARDEN_PROVIDER": "azure",
        "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string,
        "CRONWARDEN_AZURE_TABLE": azurite_table,
        "CRONWARDEN_SERVICEBUS_CONNECTION": servicebus_emulator.connection_string,
        "CRONWARDEN_SERVICEBUS_QUEUE": queue_name,
        "ServiceBusConnection": servicebus_emulator.connection_string,
        "CW_TEST_EFFECTS": str(fx),
        "CW_TEST_ITEMS": "30",
        "CW_TEST_BATCH": "5",
        "CW_TEST_ITEM_DELAY": "0.05",
        "CW_TEST_RUNTIME": "2s",
    }
    provider = AzureProvider(
        connection_string=azurite.connection_string,
        table=azurite_table,
        servicebus_connection=servicebus_emulator.connection_string,
        queue_name=queue_name,
    )
    store, queue = provider.store(), provider.queue()
    run_key = Key(RUN, "fanout", "2026-01-20T02:00Z")

    def run() -> dict[str, Any]:
        found = store.get(run_key)
        return dict(found.data) if found else {}

    try:
        with reaping([start_host(env, tmp_path / "a.log")]) as procs:
            Trigger(JobSet.from_module(kill_jobs), queue).publish(RunRequest("fanout", WINDOW))
            poll(lambda: len(effects(fx, "item")) >= 12, what="12 items processed")
            procs[0].signal(signal.SIGKILL)
            procs[0].popen.wait(timeout=10)
            killed_after = len(effects(fx, "item"))
            second = start_host(env, tmp_path / "b.log")
            procs.append(second)
            poll(lambda: run().get("state") == "succeeded", deadline=60, what="resumed run")
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
        assert all(e["uncertain"] for e in items if e["item"] in redone and e["run_id"] in resumed)
        ledger = store.query(ITEM, "fanout", prefix="2026-01-20T02:00Z/")
        assert len(ledger) == 30 and all(r.data["state"] == "done" for r in ledger)
        assert queue.dlq_depth() == 0
        assert not queue.receive(1, wait=1.0)  # every copy of the request was settled
    finally:
        provider.close()
        servicebus_emulator.delete_queue(queue_name)
