"""Real OS processes hosting the function app (``python -m cronwarden.adapters.azure.host``) on
Azurite + the Service Bus emulator: SIGKILL mid-run, the Service Bus lock expires, another host
process gets the message and resumes the run from its checkpoint and ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronwarden.adapters.azure import AzureProvider
from cronwarden.emulators.azurite import Azurite
from tests.support.kill_resume import assert_resumed_once, job_env, kill_and_resume, start_module
from tests.support.procs import Proc

from . import kill_jobs

pytestmark = [pytest.mark.azure, pytest.mark.slow]


def start_host(env: dict[str, str], log: Path) -> Proc:
    args = ["--jobs", "tests.azure.kill_jobs", "--no-timers", "--lease-margin", "0.3"]
    return start_module("cronwarden.adapters.azure.host", args, env, log)


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
        **job_env(fx),
    }
    provider = AzureProvider(
        connection_string=azurite.connection_string,
        table=azurite_table,
        servicebus_connection=servicebus_emulator.connection_string,
        queue_name=queue_name,
    )
    store, queue = provider.store(), provider.queue()
    try:
        final, killed_after, code = kill_and_resume(
            lambda log: start_host(env, log), tmp_path, kill_jobs, queue, store
        )
        assert code == 0
        assert_resumed_once(final, killed_after, fx, store)
        assert queue.dlq_depth() == 0
        assert not queue.receive(1, wait=1.0)  # every copy of the request was settled
    finally:
        provider.close()
        servicebus_emulator.delete_queue(queue_name)
