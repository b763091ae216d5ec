"""The example job module runs on Azure unchanged: the very file from ``examples/``, behind the
``function_app.py`` the deployment renderer produces (its golden copy), with configuration only
(app settings = environment variables) selecting Table Storage and Service Bus."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwarden.adapters.azure.functions import runtime_of
from cronwarden.adapters.azure.host import LocalHost
from cronwarden.emulators.azurite import Azurite
from cronwarden.model.ports import RUN, STATUS, Key
from tests.support.procs import ROOT, poll

pytestmark = [pytest.mark.azure, pytest.mark.slow]
EXAMPLE = ROOT / "examples" / "nightly_export.py"
GOLDEN = ROOT / "tests" / "deploy" / "golden" / "azure-nightly" / "function"


def sent(mail: Path) -> list[tuple[str, str]]:
    if not mail.exists():
        return []
    with sqlite3.connect(mail) as db:
        return list(db.execute("SELECT idem, body FROM sent"))


def test_nightly_export_example_runs_unchanged_on_azure(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    azurite: Azurite,
    azurite_table: str,
    servicebus_emulator: Any,
) -> None:
    source = EXAMPLE.read_bytes()
    package = tmp_path / "function"  # the function package as deployed
    shutil.copytree(GOLDEN, package)
    shutil.copy(EXAMPLE, package / "nightly_export.py")
    queue_name = servicebus_emulator.create_queue(
        max_delivery_count=5, lock_duration=30.0, requires_duplicate_detection=True
    )
    mail = tmp_path / "mail.db"
    settings = {  # the rendered app settings, pointed at the emulators
        "CRONWARDEN_PROVIDER": "azure",
        "CRONWARDEN_FUNCTIONS": "trigger,worker,watcher",
        "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string,
        "CRONWARDEN_AZURE_TABLE": azurite_table,
        "CRONWARDEN_SERVICEBUS_CONNECTION": servicebus_emulator.connection_string,
        "CRONWARDEN_SERVICEBUS_QUEUE": queue_name,
        "CRONWARDEN_SCHEDULE_NIGHTLY_EXPORT": "0 0 0,1 * * *",
        "CRONWARDEN_WATCHER_SCHEDULE": "0 */5 * * * *",
        "ServiceBusConnection": servicebus_emulator.connection_string,
        "EXAMPLE_MAIL_SINK": str(mail),
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.delitem(sys.modules, "nightly_export", raising=False)
    spec = importlib.util.spec_from_file_location("function_app", package / "function_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    host = LocalHost(module.app)
    runtime = runtime_of(module.app)
    # The timer fires at 00:00 and 01:00 UTC; the job's window is 02:00 Berlin (01:00 UTC). A
    # tick is the first after a window only from 01:00 to 24:00 UTC, so the host's clock is
    # set a minute past the job's latest window: the test passes at any time of day.
    job = runtime.jobs["nightly-export"]
    tick_at = job.schedule.floor(datetime.now(UTC)) + timedelta(minutes=1)
    runtime.clock = lambda: tick_at
    try:
        assert sorted(host.timers) == ["timer_nightly_export", "watcher"]
        store = runtime.provider.store()

        def runs() -> dict[str, dict[str, Any]]:
            return {r.key.id: r.data for r in store.query(RUN, "nightly-export")}

        # The timer fires; the trigger enqueues the latest window and, by the job's catch-up
        # policy, the oldest missed window of the last 3 days. The host hands them to the
        # worker one at a time; tick again whenever the queue is idle until both kinds ran.
        def current_and_catch_up_succeeded() -> bool:
            done = {str(r["reason"]) for r in runs().values() if r["state"] == "succeeded"}
            if {"schedule", "catch_up"} <= done:
                return True
            if host.deliver(wait=0.5) == 0:
                host.fire("timer_nightly_export")
            return False

        poll(current_and_catch_up_succeeded, deadline=60, what="current and catch-up windows")
        records = runs()
        assert all(r["state"] == "succeeded" for r in records.values()), records
        reasons = Counter(str(r["reason"]) for r in records.values())
        assert reasons["schedule"] == 1 and reasons["catch_up"] >= 1, records
        mails = sent(mail)
        per_window = Counter(json.loads(body)["window"] for _, body in mails)
        assert len(per_window) == len(records)
        assert all(count == 25 for count in per_window.values()), per_window
        assert len({idem for idem, _ in mails}) == len(mails)
        status = store.get(Key(STATUS, "nightly-export"))
        assert status is not None and status.data["status"] == "succeeded"
        assert status.data["counters"]["emails_sent"] == 25
        start = time.monotonic()
        host.fire("watcher")
        report = runtime.last_report
        assert report is not None and report.dlq_depth == 0
        assert time.monotonic() - start < 10
    finally:
        host.close()
        servicebus_emulator.delete_queue(queue_name)
    assert EXAMPLE.read_bytes() == source  # the module was not touched
