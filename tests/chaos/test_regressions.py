"""In-process regression tests for the core fixes the chaos harness led to (fast)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import RunContext, RunRequest
from cronwarden.model.errors import Cancelled
from cronwarden.model.ports import LOCK, RUN, Key
from cronwarden.run.engine import OutcomeKind
from cronwarden.run.lease import Lease, LeaseKeeper
from tests.support.harness import FakeClock, harness

pytestmark = pytest.mark.chaos
W = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


def test_owner_stops_at_max_runtime_though_its_lease_runs_longer(tmp_path: Path) -> None:
    """The lease margin is for clock skew: past claim + max runtime the owner's own ctx
    calls raise, though the written lease (max runtime + margin) has not run out."""
    from cronwarden.adapters.local import SQLiteStore

    store = SQLiteStore(str(tmp_path / "s.db"))
    clock = FakeClock(W)
    run = {"run_key": "j:w", "started_at": W.isoformat(), "lease_expires": None}
    lease = Lease(
        store, clock, timedelta(seconds=63), Key(RUN, "j", "w"), run, 1, Key(LOCK, "j"), {}, 1
    )
    keeper = LeaseKeeper(lease, max_runtime=timedelta(seconds=3), interval=21)
    clock.advance(2.9)
    lease.check()  # still within the run's max runtime
    clock.advance(0.2)
    with pytest.raises(Cancelled):
        lease.check()
    assert keeper.lease is lease
    store.close()


def test_deferred_request_is_not_dead_lettered_by_the_broker(tmp_path: Path) -> None:
    """A request deferred behind the job's lock more times than the broker's max deliveries
    still runs once the lock frees (it is re-enqueued, not retried)."""
    release, started = threading.Event(), threading.Event()

    def hold(ctx: RunContext) -> None:
        started.set()
        while not release.is_set():
            ctx.sleep(0.01)

    job = cronwarden.job(
        "hold",
        cron="0 * * * *",
        max_runtime="30s",
        overlap="defer",
        retry=cronwarden.Retry(min_backoff="0s", max_backoff="0s"),
    )(hold)
    made = harness(tmp_path, [job], max_deliveries=2)
    try:
        runner = threading.Thread(target=made.engine.execute, args=(RunRequest("hold", W),))
        runner.start()
        assert started.wait(10)
        made.trigger.publish(RunRequest("hold", W + timedelta(hours=1)))
        kinds = []
        for _ in range(5):  # five deferrals; the broker allows two deliveries
            (delivery,) = made.queue.receive(1, visibility=30, wait=5)
            outcome = made.worker.handle(delivery)
            assert outcome is not None
            kinds.append(outcome.kind)
        assert set(kinds) == {OutcomeKind.DEFERRED}
        assert made.queue.dlq_depth() == 0
        release.set()
        runner.join(10)
        (delivery,) = made.queue.receive(1, visibility=30, wait=5)
        final = made.worker.handle(delivery)
        assert final is not None and final.kind is OutcomeKind.SUCCEEDED
        assert delivery.attributes["cw-postponed"] == "5"
    finally:
        release.set()
        made.close()
