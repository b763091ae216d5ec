"""The overview judges in full only the jobs that can be problems, and says exactly what judging
every job says: the same counts, the same problems-first order, the same rows, page by page.

A mixed fleet is run through the real engine (:func:`cronwarden.testing.run.run_once`) and
judged by a real watcher, on SQLite and on the Firestore emulator; then the clock moves on
without a watcher check (a scheduler goes silent, windows fall due) and the fast overview is
compared with ``full=True`` at several instants."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwarden import JobSet, Retry, job
from cronwarden.dashboard.views import Dashboard, overview
from cronwarden.jobs.pause import pause
from cronwarden.model.ports import Store
from cronwarden.testing.clock import FakeClock
from cronwarden.testing.run import run_once
from cronwarden.watch.watcher import Watcher
from tests.backends import MARKS, STORES

T0 = datetime(2026, 1, 20, 10, 0, tzinfo=UTC)
HEALTHY = 12


def _ok(ctx: Any) -> None:
    return None


def _boom(ctx: Any) -> None:
    raise RuntimeError("the upstream API answered 503")


def _fleet(changed_cron: str) -> JobSet:
    def j(name: str, handler: Any = _ok, **kw: Any) -> Any:
        kw.setdefault("cron", "0 * * * *")
        return job(name, max_runtime="10m", **kw)(handler)

    return JobSet(
        [
            *(j(f"healthy-{i:02d}", owner="team-a" if i % 2 else "team-b") for i in range(6)),
            j("silent"),  # its scheduler stops firing after the first window
            *(j(f"healthy-{i:02d}", tags=["eu"]) for i in range(6, HEALTHY)),
            j("failing", _boom, retry=Retry(max_attempts=5)),
            j("dead", _boom, retry=Retry(max_attempts=1)),
            j("paused"),
            j("never"),
            j("changed", cron=changed_cron),  # the definition moves from daily to hourly
        ]
    )


@pytest.fixture(params=[pytest.param(name, marks=MARKS[name]) for name in ("sqlite", "firestore")])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with STORES[request.param](request, tmp_path) as made:
        yield made


def _run_window(jobs: JobSet, store: Store, window: datetime, skip: set[str]) -> None:
    clock = FakeClock(window + timedelta(minutes=1))
    for item in jobs:
        if item.name in skip or item.schedule.floor(window) != window:
            continue
        run_once(item, window, store=store, clock=clock)


def _judge(jobs: JobSet, store: Store, now: datetime) -> None:
    Watcher(jobs, store, None, notifiers=[], clock=lambda: now, hooks=[]).check()


def _all_pages(
    dash: Dashboard, limit: int, **filters: Any
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every page of the overview, fast and judged in full (``full=True``)."""
    first = overview(dash, limit=limit, full=True, **filters)
    return [
        (
            overview(dash, limit=limit, page=p, **filters),
            overview(dash, limit=limit, page=p, full=True, **filters),
        )
        for p in range(1, first["pages"] + 1)
    ]


def test_the_fast_overview_says_what_judging_every_job_says(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = _fleet("0 0 * * *"), _fleet("0 * * * *")
    midnight = T0.replace(hour=0)
    _run_window(before, store, midnight, {j.name for j in before} - {"changed"})
    _run_window(before, store, T0, {"never"})
    pause(store, "paused", reason="maintenance", by="ops", now=T0 + timedelta(minutes=3))
    _judge(before, store, T0 + timedelta(minutes=5))  # writes every job's watch_due
    _run_window(before, store, T0 + timedelta(hours=1), {"never", "silent"})
    _judge(before, store, T0 + timedelta(hours=1, minutes=5))

    judged: list[str] = []
    real = Watcher._job_health

    def counted(self: Watcher, job: Any, *args: Any, **kw: Any) -> Any:
        judged.append(job.name)
        return real(self, job, *args, **kw)

    monkeypatch.setattr(Watcher, "_job_health", counted)
    clock = FakeClock(T0 + timedelta(hours=1, minutes=30))
    dash = Dashboard(after, store, None, clock=clock)
    seen_problems = []
    # 11:30 all within grace; 12:30 silent's 11:00 window is past its deadline (no check ran
    # since); 13:30 every job without a 12:00 run is missed
    for at in (
        timedelta(hours=1, minutes=30),
        timedelta(hours=2, minutes=30),
        timedelta(hours=3, minutes=30),
    ):
        clock.set(T0 + at)
        for limit in (4, 100):
            for fast, full in _all_pages(dash, limit):
                assert fast == full
        for filters in ({"owner": "team-a"}, {"tag": "eu"}, {"state": "healthy"}):
            for fast, full in _all_pages(dash, 3, **filters):
                assert fast == full
        judged.clear()
        first = overview(dash, limit=1)
        # the one row shown, the problems, the paused and the never-run job: not the fleet
        assert len(judged) == len(set(judged)) <= first["problem_jobs"] + 2, judged
        if at < timedelta(hours=3):  # the healthy jobs are settled by their records
            assert not {f"healthy-{i:02d}" for i in range(1, HEALTHY)} & set(judged), judged
        every = overview(dash, limit=100)
        seen_problems.append({row["name"] for row in every["jobs"][: first["problem_jobs"]]})

    at_1130, at_1230, at_1330 = seen_problems
    assert {"failing", "dead", "changed"} <= at_1130
    assert "silent" not in at_1130
    assert "silent" in at_1230  # missed, found without a watcher check
    assert {"never", "silent"} <= at_1330


def test_a_row_whose_record_broke_its_promise_says_what_judging_it_finds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A record that says "not due, nothing to follow" while a condition holds (written by
    hand here: no commit of cronwarden writes one) is counted from its record, but its row is
    judged in full: the row shows the alert and an error log line names the mismatch."""
    from cronwarden.adapters.local import SQLiteStore
    from cronwarden.model.ports import Merge
    from cronwarden.model.records import due_ts, iso, status_key_of

    jobs = _fleet("0 * * * *")
    now = T0 + timedelta(minutes=30)
    store = SQLiteStore(str(tmp_path / "state.db"))
    try:
        _run_window(jobs, store, T0, set())
        store.commit(
            [
                Merge(
                    status_key_of("healthy-00"),
                    {
                        "skips_since_success": 7,
                        "last_skip_owner": "worker-9",
                        "last_skip_at": iso(now),
                        "watch_due": due_ts(now) + 600,
                    },
                )
            ]
        )
        dash = Dashboard(JobSet([jobs.get("healthy-00")]), store, None, clock=lambda: now)
        with caplog.at_level("ERROR"):
            fast = overview(dash)
        full = overview(dash, full=True)
    finally:
        store.close()
    assert full["states"]["alerting"] == 1
    assert fast["states"]["alerting"] == 0  # counted from the record
    assert fast["jobs"] == full["jobs"]  # the row itself is judged: it shows the alert
    assert fast["jobs"][0]["state"] == "alerting"
    assert any(getattr(r, "event", "") == "dashboard.triage_mismatch" for r in caplog.records)
