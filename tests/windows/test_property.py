"""[windows] Property: random interleavings of fires (some dropped), failures, crashes,
redrives, resolves and watcher checks. However they interleave, once the queue is drained and
every grace has passed, each due window is succeeded or excused, or the watcher raises it
(``missed`` naming the oldest gap, ``dead_letters`` for dead-lettered windows)."""

from __future__ import annotations

import shutil
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cronwarden
from cronwarden import Condition, Engine, EngineSettings, JobSet, RunRequest, Trigger, Watcher
from cronwarden.cli.windows import resolve_window
from cronwarden.hosting.trigger import Worker
from cronwarden.run.accounting import WindowStatus, window_states
from cronwarden.run.engine import Outcome
from cronwarden.testing import FakeClock, MemoryQueue, MemoryStore

START = "2026-01-20T10:00:00Z"
STEPS = st.lists(
    st.sampled_from(["fire", "drop", "work", "fail", "crash", "redrive", "resolve", "check"]),
    min_size=5,
    max_size=40,
)


def _world(overlap: str, backend: str) -> dict[str, Any]:
    clock = FakeClock(START)
    flags = {"fail": False}

    def handler(ctx: Any) -> None:
        if flags["fail"]:
            raise ConnectionError("upstream down")

    job = cronwarden.job(
        "prop",
        cron="*/15 * * * *",
        max_runtime="5m",
        overlap=overlap,
        retry=cronwarden.Retry(2, 0, 0),
    )(handler)
    jobs = JobSet([job])
    store: Any = MemoryStore()
    tmp = ""
    if backend == "sqlite":
        from cronwarden.adapters.local import SQLiteStore

        tmp = tempfile.mkdtemp(prefix="cw-prop-")
        store = SQLiteStore(str(Path(tmp) / "state.db"))
    queue = MemoryQueue(clock=clock, max_deliveries=5)
    engine = Engine(jobs, store, EngineSettings(clock=clock))
    return {
        "tmp": tmp,
        "clock": clock,
        "flags": flags,
        "job": job,
        "jobs": jobs,
        "store": store,
        "queue": queue,
        "engine": engine,
        "trigger": Trigger(jobs, queue, store),
        "worker": Worker(engine, queue),
        "watcher": Watcher(jobs, store, queue, notifiers=[], clock=clock),
    }


def _step(w: dict[str, Any], action: str) -> None:
    clock, queue, job = w["clock"], w["queue"], w["job"]
    if action in ("fire", "drop"):
        nxt = job.schedule.next_after(clock())
        clock.set(nxt + timedelta(seconds=3))
        if action == "fire":
            w["trigger"].tick(job.name, clock())
    elif action in ("work", "fail"):
        w["flags"]["fail"] = action == "fail"
        w["worker"].poll(max_messages=1, wait=0)
        w["flags"]["fail"] = False
    elif action == "crash":  # a worker takes a delivery, claims, and dies
        for delivery in queue.receive(1, visibility=w["worker"].visibility):
            request = RunRequest.from_json(delivery.body)
            claimed = w["engine"].claim(job, request)
            assert (claimed is not None and not isinstance(claimed, Outcome)) or True
    elif action == "redrive":
        queue.redrive(2)
    elif action == "resolve":
        now = clock()
        for state in window_states(w["store"], job, job.schedule.next_after(_start()), now, now):
            if state.state is WindowStatus.DEAD_LETTERED:
                resolve_window(w["store"], job, state.window, "checked", actor="prop", now=now)
                break
    else:
        w["watcher"].check()
    clock.advance(20)


def _start() -> Any:
    return FakeClock(START)() - timedelta(minutes=1)


def _drain(w: dict[str, Any]) -> None:
    clock = w["clock"]
    for _ in range(60):  # let visibility timeouts, leases and delays pass; work everything
        clock.advance(timedelta(minutes=2))
        while w["worker"].poll(max_messages=5, wait=0):
            pass
        if not w["queue"].pending():
            break
    clock.advance(timedelta(hours=1))  # every grace has passed


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    steps=STEPS,
    overlap=st.sampled_from(["skip", "defer", "fail"]),
    backend=st.sampled_from(["memory", "sqlite"]),
)
def test_every_due_window_ends_accounted_for_or_raised(
    steps: list[str], overlap: str, backend: str
) -> None:
    w = _world(overlap, backend)
    try:
        _check_property(w, steps)
    finally:
        w["store"].close()
        if w["tmp"]:
            shutil.rmtree(w["tmp"], ignore_errors=True)


def _check_property(w: dict[str, Any], steps: list[str]) -> None:
    w["watcher"].check()  # first sight: windows from here on are owed
    for action in steps:
        _step(w, action)
    _drain(w)
    report = w["watcher"].check()
    job, now = w["job"], w["clock"]()
    first_owed = job.schedule.next_after(FakeClock(START)())
    states = window_states(w["store"], job, first_owed, now, now)
    active = {a.kind: a for a in report.active if a.job == job.name}
    gaps = [s for s in states if s.state is WindowStatus.GAP]
    dead = [s for s in states if s.state is WindowStatus.DEAD_LETTERED]
    # drained, and past every grace but the newest windows': nothing older is pending
    settled_by = [
        s for s in states if s.window + job.grace_at(s.window) <= now - timedelta(hours=1)
    ]
    in_flight = [s for s in settled_by if s.state.in_flight]
    assert not in_flight, in_flight
    if gaps:
        assert Condition.MISSED in active, states
        assert active[Condition.MISSED].extra["window"] == gaps[0].window_text
        assert active[Condition.MISSED].extra["unaccounted"] == len(gaps)
    else:
        assert Condition.MISSED not in active, (active, states)
    assert (Condition.DEAD_LETTERS in active) == bool(dead), (active, states)
    assert report.ok == (not gaps and not dead and not (active.keys() - {Condition.SKIPPING})) or (
        not report.ok
    )
