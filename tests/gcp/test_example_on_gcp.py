"""The example job module runs on GCP unchanged: the very file from ``examples/``, behind the
``main.py`` the deployment renderer produces (its golden copy), with configuration only —
environment variables — selecting Firestore and Pub/Sub instead of SQLite."""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest

from cronwarden.emulators.gcp import FirestoreEmulator, PubSubEmulator
from cronwarden.model.ports import RUN, STATUS, Key
from tests.support.procs import ROOT, poll

from .hosting import deployed

pytestmark = [pytest.mark.gcp, pytest.mark.slow]
EXAMPLE = ROOT / "examples" / "nightly_export.py"
RENDERED_MAIN = ROOT / "tests" / "deploy" / "golden" / "gcp-nightly-pull" / "function" / "main.py"


def sent(mail: Path) -> list[tuple[str, str]]:
    if not mail.exists():
        return []
    with sqlite3.connect(mail) as db:
        return list(db.execute("SELECT idem, body FROM sent"))


def test_nightly_export_example_runs_unchanged_on_gcp(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pubsub_emulator: PubSubEmulator,
    firestore_emulator: FirestoreEmulator,
) -> None:
    mail = tmp_path / "mail.db"
    source = EXAMPLE.read_bytes()
    with deployed(
        tmp_path,
        monkeypatch,
        pubsub_emulator,
        firestore_emulator,
        main_source=RENDERED_MAIN.read_text(),
        extra_files={"nightly_export.py": source},  # shipped beside main.py, as packaged
        env={"EXAMPLE_MAIL_SINK": str(mail)},
    ) as d:
        assert [job.name for job in d.jobs] == ["nightly-export"]
        driver = d.driver()

        def runs() -> dict[str, dict[str, object]]:
            return {r.key.id: r.data for r in d.store.query(RUN, "nightly-export")}

        # Cloud Scheduler fires; the trigger enqueues the current window and, by the job's
        # catch-up policy, the oldest missed window of the last 3 days; both are pushed at
        # once. The job's overlap policy is "skip": whichever loses the lock is skipped and
        # comes back with a later tick (the current window is re-sent by every tick, a missed
        # one stays missing). Tick every second until the current window and a catch-up ran.
        last_fire = [0.0]

        def two_succeeded() -> bool:
            done = {str(r["reason"]) for r in runs().values() if r["state"] == "succeeded"}
            if {"schedule", "catch_up"} <= done:
                return True
            if time.monotonic() - last_fire[0] > 1.0:
                driver.fire("nightly-export")
                last_fire[0] = time.monotonic()
            return False

        poll(two_succeeded, deadline=60, what="current and catch-up windows succeeded")
        poll(
            lambda: all(r["state"] != "running" for r in runs().values()),
            deadline=30,
            what="no run in flight",
        )
        records = runs()
        assert all(r["state"] == "succeeded" for r in records.values()), records
        reasons = Counter(str(r["reason"]) for r in records.values())
        assert reasons["schedule"] == 1 and reasons["catch_up"] >= 1, records
        # 25 customers per window, each emailed once with its own idempotency key.
        mails = sent(mail)
        per_window = Counter(json.loads(body)["window"] for _, body in mails)
        assert len(per_window) == len(records)
        assert all(count == 25 for count in per_window.values()), per_window
        assert len({idem for idem, _ in mails}) == len(mails)
        status = d.store.get(Key(STATUS, "nightly-export"))
        assert status is not None and status.data["status"] == "succeeded"
        assert status.data["counters"]["emails_sent"] == 25
    assert EXAMPLE.read_bytes() == source  # the module was not touched
