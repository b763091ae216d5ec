"""The process-wide lease renewal scheduler (:mod:`cronwarden.run.renewal`) behind
:class:`~cronwarden.run.lease.LeaseKeeper`, on a real SQLite store: no thread per keeper, many
leases renewed on time, one hanging store does not starve another lease, stop() waits for a
renewal in progress, max runtime interrupts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronwarden.adapters.local import SQLiteStore
from cronwarden.model.errors import Cancelled, LeaseLost
from cronwarden.model.ports import LOCK, RUN, Create, Key, Op, Store, Update
from cronwarden.run.lease import Lease, LeaseKeeper
from cronwarden.run.renewal import scheduler
from cronwarden.testing.faults import UNAVAILABLE, Fault, FaultyStore


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    made = SQLiteStore(str(tmp_path / "state.db"))
    yield made
    made.close()


def lease_on(store: Store, job: str, ttl: float, via: Store | None = None) -> Lease:
    """A lease on fresh run and lock records of ``job`` (as a claim leaves them), writing
    through ``via`` (a faulty wrapper of ``store``) when given."""
    started = now()
    run = {
        "run_key": f"{job}:w",
        "job": job,
        "started_at": started.isoformat(),
        "lease_expires": (started + timedelta(seconds=ttl)).isoformat(),
    }
    lock = {"owner": "me", "run_id": f"{job}-run"}
    run_key, lock_key = Key(RUN, job, "w"), Key(LOCK, job)
    versions = store.commit([Create(run_key, run), Create(lock_key, lock)])
    return Lease(
        via or store,
        now,
        timedelta(seconds=ttl),
        run_key,
        run,
        versions[0],
        lock_key,
        lock,
        versions[1],
    )


def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def renewal_threads() -> int:
    return sum(t.name.startswith("cronwarden-") for t in threading.enumerate())


def test_keepers_start_no_thread_of_their_own(store: SQLiteStore) -> None:
    keepers = [
        LeaseKeeper(lease_on(store, f"j{i}", 60), max_runtime=timedelta(hours=1), interval=20)
        for i in range(30)
    ]
    keepers[0].start()  # the scheduler's thread, made once per process
    before = renewal_threads()
    for keeper in keepers[1:]:
        keeper.start()
    assert renewal_threads() == before  # nothing is due yet: no worker, no thread per run
    assert all(k.is_alive() for k in keepers)
    for keeper in keepers:
        keeper.stop()
    assert not any(k.is_alive() for k in keepers)
    assert all(k.lease.renewals == 0 and not k.lease.lost for k in keepers)


def test_many_leases_are_renewed_before_they_run_out(store: SQLiteStore) -> None:
    ttl = 3.0
    keepers = [
        LeaseKeeper(lease_on(store, f"j{i}", ttl), max_runtime=timedelta(hours=1), interval=0.3)
        for i in range(40)
    ]
    for keeper in keepers:
        keeper.start()
    try:
        assert wait_for(lambda: all(k.lease.renewals >= 3 for k in keepers))
        for keeper in keepers:
            keeper.lease.check()  # none expired, none lost
            stored = store.get(keeper.lease.run_key)
            assert stored is not None and stored.version == keeper.lease.run_version
    finally:
        for keeper in keepers:
            keeper.stop()


class Hang:
    """Blocks commits of one job's records until released (the store hangs for that lease)."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, operation: str, ops: Sequence[Op]) -> bool:
        if operation == "commit" and ops and ops[0].key.job == self.job:
            self.entered.set()
            self.release.wait(30)
        return False  # only delays; never raises


def test_a_hanging_renewal_does_not_starve_another_lease(store: SQLiteStore) -> None:
    hang = Hang("stuck")  # (a FaultyStore runs its matchers one at a time: stuck only)
    faulty = FaultyStore(store, [Fault(UNAVAILABLE, match=hang, times=10**9)])
    stuck = LeaseKeeper(
        lease_on(store, "stuck", 60, faulty), max_runtime=timedelta(hours=1), interval=0.05
    )
    ttl = 1.0
    other = LeaseKeeper(lease_on(store, "other", ttl), max_runtime=timedelta(hours=1), interval=0.1)
    stuck.start()
    try:
        assert hang.entered.wait(10)  # the stuck lease's renewal is blocked in the store
        other.start()
        # the other lease is renewed many times over its TTL while the first one hangs
        assert wait_for(lambda: other.lease.renewals >= 15)
        other.lease.check()
        assert stuck.lease.renewals == 0
    finally:
        hang.release.set()
        other.stop()
        stuck.stop()
    assert not stuck.lease.lost


def test_stop_waits_for_the_renewal_in_progress(store: SQLiteStore) -> None:
    hang = Hang("j")
    faulty = FaultyStore(store, [Fault(UNAVAILABLE, match=hang, times=10**9)])
    keeper = LeaseKeeper(
        lease_on(store, "j", 60, faulty), max_runtime=timedelta(hours=1), interval=0.05
    )
    keeper.start()
    assert hang.entered.wait(10)
    stopped = threading.Event()

    def stop() -> None:
        keeper.stop()
        stopped.set()

    stopper = threading.Thread(target=stop)
    stopper.start()
    try:
        assert not stopped.wait(0.3)  # the renewal is still in the store: stop() waits
        assert keeper.lease.renewals == 0
    finally:
        hang.release.set()
    assert stopped.wait(10)
    stopper.join(10)
    assert keeper.lease.renewals == 1  # the renewal finished before stop() returned
    assert not keeper.is_alive()
    assert not keeper.lease.quit_retrying.is_set()  # the run's last commit retries as usual
    # nothing renews after stop(): the run's last commit has the records to itself
    version = keeper.lease.run_version
    time.sleep(0.2)  # longer than the interval: a renewal, if any were left, would land
    stored = store.get(keeper.lease.run_key)
    assert stored is not None and stored.version == version


def test_stop_makes_a_renewal_retrying_an_unreachable_store_give_up(store: SQLiteStore) -> None:
    down = threading.Event()
    down.set()
    entered = threading.Event()

    def renewals_while_down(operation: str, ops: Sequence[Op]) -> bool:
        if operation == "commit" and down.is_set():
            entered.set()
            return True
        return False

    faulty = FaultyStore(store, [Fault(UNAVAILABLE, match=renewals_while_down, times=10**9)])
    lease = lease_on(store, "j", 60, faulty)
    lease.retry_for = 60.0
    keeper = LeaseKeeper(lease, max_runtime=timedelta(hours=1), interval=0.05)
    keeper.start()
    assert entered.wait(10)
    begun = time.monotonic()
    keeper.stop()  # returns well before the renewal's 60 s of retries
    assert time.monotonic() - begun < 30
    assert not keeper.is_alive() and not lease.lost


def test_max_runtime_interrupts_the_run(store: SQLiteStore) -> None:
    lease = lease_on(store, "j", 60)
    keeper = LeaseKeeper(lease, max_runtime=timedelta(seconds=0.2), interval=0.05)
    keeper.start()
    assert wait_for(lambda: not keeper.is_alive())
    assert isinstance(lease.interruption, Cancelled)
    assert lease.stop_event.is_set()
    with pytest.raises(Cancelled):
        lease.check()
    keeper.stop()  # after the keeper ended on its own: returns at once


def test_a_refused_renewal_reports_the_lease_lost(store: SQLiteStore) -> None:
    lease = lease_on(store, "j", 60)
    lost: list[LeaseLost] = []
    keeper = LeaseKeeper(lease, max_runtime=timedelta(hours=1), interval=0.05, on_lost=lost.append)
    stored = store.get(lease.run_key)
    assert stored is not None
    # another owner took the run over
    store.commit([Update(lease.run_key, {**stored.data, "owner": "thief"}, stored.version)])
    keeper.start()
    assert wait_for(lambda: not keeper.is_alive())
    assert len(lost) == 1 and lease.lost
    keeper.stop()


def test_runs_that_end_before_their_renewal_leave_no_entries_behind(store: SQLiteStore) -> None:
    lease = lease_on(store, "j", 600)
    for _ in range(500):  # each run ends long before its first renewal is due
        keeper = LeaseKeeper(lease, max_runtime=timedelta(hours=1), interval=300)
        keeper.start()
        keeper.stop()
        assert not keeper.is_alive()
    assert len(scheduler()._heap) <= 200  # halted entries are dropped, not kept for 300 s
    assert lease.renewals == 0
