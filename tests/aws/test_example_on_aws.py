"""The example job module runs on AWS unchanged: the very file from ``examples/``, behind the
``handler.py`` the renderer produces, with configuration only (the functions' environment)
selecting DynamoDB and SQS, its schedule read back from EventBridge Scheduler and fired by the
local driver, its run requests fed to the worker handler by the local event-source host."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwarden.adapters.aws.deploy import render
from cronwarden.adapters.aws.functions import runtime_of
from cronwarden.emulators.aws import MotoServer
from cronwarden.emulators.aws.driver import ScheduleDriver
from cronwarden.emulators.aws.event_source import EventSourceHost
from cronwarden.model.ports import RUN, STATUS, Key
from tests.aws.conftest import TRIGGER_ARN, create_schedules
from tests.support.procs import ROOT

pytestmark = [pytest.mark.aws]
EXAMPLE = ROOT / "examples" / "nightly_export.py"


def sent(mail: Path) -> list[tuple[str, str]]:
    if not mail.exists():
        return []
    with sqlite3.connect(mail) as db:
        return list(db.execute("SELECT idem, body FROM sent"))


def test_nightly_export_example_runs_unchanged_on_aws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: MotoServer
) -> None:
    source = EXAMPLE.read_bytes()
    rendered = render(str(EXAMPLE), tmp_path / "deploy", prefix="cwex")
    package = rendered.out / "function"
    settings = moto_server.settings(max_receive_count=6)
    mail = tmp_path / "mail.db"
    for name, value in {
        **settings.to_env(),
        "CRONWARDEN_PROVIDER": "aws",
        "EXAMPLE_MAIL_SINK": str(mail),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.delitem(sys.modules, "nightly_export", raising=False)
    spec = importlib.util.spec_from_file_location("handler", package / "handler.py")
    assert spec is not None and spec.loader is not None
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    runtime = runtime_of(handler.worker)
    queue = runtime.sqs()
    host = EventSourceHost(queue.client, queue.queue_url, handler.worker, batch_size=1)
    scheduler = moto_server.client("scheduler")
    create_schedules(scheduler, runtime.jobs, settings.table, prefix="cwex")
    driver = ScheduleDriver(scheduler, {TRIGGER_ARN: handler.trigger}, group=settings.table)
    store = runtime.provider.store()
    try:

        def runs() -> dict[str, dict[str, Any]]:
            return {r.key.id: r.data for r in store.query(RUN, "nightly-export")}

        # Every tick of the last day: the UTC schedule fires at 00:00 and 01:00; only the one
        # that is 02:00 in Berlin enqueues (and the catch-up policy adds missed windows).
        now = datetime.now(UTC)
        assert driver.run(now - timedelta(days=1), now) == 2

        def settled() -> bool:
            attrs = queue.client.get_queue_attributes(
                QueueUrl=queue.queue_url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )["Attributes"]
            in_queue = sum(int(v) for v in attrs.values())
            return in_queue == 0 and bool(runs())

        host.run_until(settled)
        assert queue.dlq_depth() == 0
        records = runs()
        assert records and all(r["state"] == "succeeded" for r in records.values()), records
        reasons = Counter(str(r["reason"]) for r in records.values())
        assert reasons["schedule"] == 1, records
        mails = sent(mail)
        per_window = Counter(json.loads(body)["window"] for _, body in mails)
        assert len(per_window) == len(records)
        assert all(count == 25 for count in per_window.values()), per_window
        assert len({idem for idem, _ in mails}) == len(mails)
        status = store.get(Key(STATUS, "nightly-export"))
        assert status is not None and status.data["status"] == "succeeded"
        report = handler.watcher({"source": "cronwarden.watcher"}, None)
        assert report["dlq_depth"] == 0
    finally:
        runtime.close()
        scheduler.close()
    assert EXAMPLE.read_bytes() == source  # the module was not touched
