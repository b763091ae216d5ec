"""[scale] A check reads what is due, not every job, and raises what a full read raises.

On every store (SQLite, memory, Firestore emulator, Azurite, PostgreSQL, DynamoDB on moto): a
fleet of jobs runs through the real engine; the watcher's checks are counted with the store's
round-trip observer and its ``last_read``, and each check's conditions are compared with those
of a full evaluation of every status record at the same instant (what the watcher did before).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import Condition, Engine, EngineSettings, JobSet, RunRequest, Watcher
from cronwarden.model.ports import STATUS, RoundTrip, Store
from cronwarden.testing import FakeClock
from tests.backends import MARKS, STORES

HOUR = timedelta(hours=1)
FLEET = 12


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in STORES])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with STORES[request.param](request, tmp_path) as made:
        yield made


class Fleet:
    def __init__(self, store: Store) -> None:
        self.clock = FakeClock("2026-01-20T10:00:05Z")
        self.broken: set[str] = set()

        def handler(ctx: Any) -> None:
            if ctx.job in self.broken:
                raise ConnectionError("upstream down")

        self.jobs = JobSet(
            [
                cronwarden.job(
                    f"job-{n:02d}",
                    cron="0 * * * *",
                    max_runtime="10m",
                    retry=cronwarden.Retry(1, 0, 0),
                )(handler)
                for n in range(FLEET)
            ]
        )
        self.store = store
        self.engine = Engine(self.jobs, store, EngineSettings(clock=self.clock))
        self.watcher = Watcher(self.jobs, store, None, notifiers=[], clock=self.clock, hooks=[])
        self.trips: list[RoundTrip] = []
        self.checked: list[RoundTrip] = []
        store.add_observer(self.trips.append)

    def run(self, names: list[str]) -> None:
        window = self.jobs[names[0]].schedule.floor(self.clock())
        for name in names:
            self.engine.execute(RunRequest(name, window))

    def check(self) -> set[tuple[str, str]]:
        """One check; its conditions, asserted equal to a full evaluation's."""
        self.trips.clear()
        report = self.watcher.check()
        self.checked = list(self.trips)  # the check's round trips, not the comparison's
        found = {(a.job, a.kind.value) for a in report.active}
        full, _ = Watcher(self.jobs, self.store, None, notifiers=[], hooks=[]).evaluate(
            self.store.query(STATUS), self.clock(), None
        )
        expected = {(name, kind.value) for item in full for name, kind in _kinds(item)}
        assert found == expected, f"check {found} != full evaluation {expected}"
        return found

    def reads(self) -> tuple[int, int]:
        """(queries, gets) of the last check."""
        ops = [t.operation for t in self.checked]
        return ops.count("query") + ops.count("read"), ops.count("get")


def _kinds(item: Any) -> list[tuple[str, Condition]]:
    return [(item.job.name, kind) for kind in item.conditions]


def test_a_check_reads_only_due_records_and_still_raises_missed_on_time(store: Store) -> None:
    fleet = Fleet(store)
    names = [job.name for job in fleet.jobs]
    fleet.run(names)  # every job's 10:00 window succeeds
    assert fleet.check() == set()  # the watcher's first check reads every record
    assert fleet.watcher.last_read >= FLEET

    fleet.clock.advance(timedelta(minutes=1))
    assert fleet.check() == set()
    queries, gets = fleet.reads()
    assert fleet.watcher.last_read == 0, "a healthy fleet: no status record is due"
    # the due query (one request per indexed field at most); no reads of single records, and
    # no writes: nothing changed
    assert gets == 0 and 1 <= queries <= 2
    assert not [t for t in fleet.checked if t.operation == "commit"]

    # a failure is due at once (its commit says so): read alone, below the threshold
    fleet.broken.add("job-03")
    fleet.clock.set("2026-01-20T10:20:00Z")
    fleet.engine.execute(RunRequest("job-03", fleet.jobs["job-03"].schedule.floor(fleet.clock())))
    assert fleet.check() == set()
    assert fleet.watcher.last_read == 1
    fleet.clock.advance(timedelta(minutes=1))
    fleet.check()
    assert fleet.watcher.last_read == 0, "judged once; due again only at its retry's gap"

    # 11:00: every job but job-07 runs (its scheduler went silent); job-03 succeeds again
    fleet.broken.clear()
    fleet.clock.set("2026-01-20T11:00:05Z")
    fleet.run([n for n in names if n != "job-07"])
    fleet.clock.set("2026-01-20T11:59:59Z")  # the 11:00 window's grace (1 h) not yet over
    assert fleet.check() == set()
    assert fleet.watcher.last_read == 0

    fleet.clock.set("2026-01-20T12:00:00Z")  # 11:00 + grace: the jobs' deadline passed
    assert ("job-07", "missed") in fleet.check()  # on time, as a full read finds it
    read_at_deadline = fleet.watcher.last_read
    assert read_at_deadline <= FLEET  # each job once per window, at its deadline

    fleet.clock.advance(timedelta(minutes=1))
    assert fleet.check() == {("job-07", "missed")}
    assert fleet.watcher.last_read == 1, "only the job with an alert is followed"

    fleet.clock.set("2026-01-20T12:30:00Z")
    fleet.run(["job-07"])  # the silent job's 12:00 window runs: still missing 11:00
    assert fleet.check() == {("job-07", "missed")}


def test_a_run_that_hides_an_earlier_window_is_still_found_at_its_deadline(store: Store) -> None:
    """A later window's success overwrites what the run's commits say, never the watcher's
    own ``watch_due``: the window that never ran is missed at its own deadline."""
    fleet = Fleet(store)
    fleet.run(["job-00"])
    fleet.check()
    fleet.clock.set("2026-01-20T12:00:05Z")  # 11:00 never ran; 12:00 runs
    fleet.run(["job-00"])
    assert ("job-00", "missed") in fleet.check()


def test_a_changed_definition_is_judged_once_in_full(store: Store) -> None:
    fleet = Fleet(store)
    fleet.run([job.name for job in fleet.jobs])
    fleet.check()
    fleet.clock.set("2026-01-20T10:40:00Z")
    fleet.check()
    assert fleet.watcher.last_read == 0
    # a deploy shortens job-05's grace to 30 minutes: its 10:00 window is now past due
    changed = fleet.jobs["job-05"]
    shorter = cronwarden.job(
        "job-05", cron="*/30 * * * *", max_runtime="10m", liveness=cronwarden.Liveness(grace="5m")
    )(changed.handler)
    jobs = JobSet([shorter if j.name == "job-05" else j for j in fleet.jobs])
    fleet.jobs = jobs
    fleet.watcher.jobs = jobs
    assert ("job-05", "missed") in fleet.check()  # 10:30 + 5 m passed, and it was read
    assert fleet.watcher.last_read == 1
