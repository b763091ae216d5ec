"""``cronwarden trigger``'s last line for a run left RUNNING after the queue was worked: a live
lease is a run elsewhere; a lease that ran out is a run whose worker is gone (it resumes when
its message is delivered again). Both exit 1: neither window is done."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import cronwarden
from cronwarden import Engine, JobSet, RunRequest
from cronwarden.adapters.local import SQLiteStore
from cronwarden.ops.manual import Told, judge_after
from cronwarden.run.claiming import Claim

W = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)


def test_a_run_whose_lease_ran_out_is_abandoned_not_running_elsewhere(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "state.db"))
    declared = cronwarden.job("items", cron="0 * * * *", max_runtime="10s")(lambda ctx: None)
    jobs = JobSet([declared])
    engine = Engine(jobs, store)
    job = jobs["items"]
    held = engine.claim(job, RunRequest("items", W))
    assert isinstance(held, Claim)  # claimed, never finished: its worker died
    told = Told(f"items:{W:%Y-%m-%dT%H:%MZ}", W, "enqueued")
    expires = held.run.lease_expires
    assert expires is not None

    code, line = judge_after(store, job, told, {}, expires - timedelta(seconds=1))
    assert code == 1 and "is still running elsewhere" in line, line
    code, line = judge_after(store, job, told, {}, expires + timedelta(seconds=1))
    assert code == 1 and "lost its worker" in line and "running elsewhere" not in line, line
    store.close()
