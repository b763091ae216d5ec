"""A live switch between providers with ``cronwarden migrate``, both sides firing throughout
(used by ``test_switch.py`` and by the chaos scenario ``tests/chaos/test_migrate.py``).

Per switch: a plain job, a job whose ledger is half done (its retry is due after the move), a
job with a dead-lettered window and a paused job. The migration is killed once (SIGKILL, just
after it fenced the first job) and run again. Then: every window ran exactly once, on one side;
no ledger item was done twice; the dead letter is recorded on the destination and gone from the
source's queue; the pause moved; ``--verify`` passes; the source shows each job moved; the
destination's watcher reports no missed window.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import tests.support.jobs as support_jobs
from cronwarden.jobs import pause as pausing
from cronwarden.model.ports import Key
from cronwarden.model.records import RunRecord, run_key_of
from cronwarden.model.runs import RunState, format_window
from cronwarden.watch.health import Condition
from cronwarden.watch.watcher import Watcher

from . import jobs as jobs_module
from .harness import (
    Side,
    SideSpec,
    Stepper,
    effects,
    migrate,
    migrate_killed,
    runner,
    start_clock,
)

JOBS = ("tick", "ledger", "poison", "held")
#: how the migration is run while both sides fire: (source, destination, folder, effects db,
#: stepper); the default kills it once, just after its first fence, and runs it again
Mover = Callable[[SideSpec, SideSpec, Path, Path, Stepper], None]


def kill_once_and_resume(
    src: SideSpec, dst: SideSpec, folder: Path, effects_db: Path, stepper: Stepper
) -> None:
    lines = migrate_killed(src, dst, folder, effects_db, after_line="fenced on")
    assert any("fenced on" in line for line in lines), lines
    wait_steps(stepper, 2)
    done = migrate(src, dst, folder, effects_db)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"moved 4 job(s) from {src.label} to {dst.label}" in done.stdout


def wait_steps(stepper: Stepper, count: int, deadline: float = 120.0) -> None:
    """Poll (with a deadline) until the stepper made ``count`` more steps."""
    goal, end = stepper.steps + count, time.monotonic() + deadline
    while stepper.steps < goal:
        assert not stepper.errors, stepper.errors
        assert time.monotonic() < end, "the stepper stalled"
        time.sleep(0.05)


def switch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    src: SideSpec,
    dst: SideSpec,
    move: Mover = kill_once_and_resume,
    *,
    duplicates: bool = False,
) -> dict[str, int]:
    """The switch and its checks; returns the figures checked (all 0 when it passed)."""
    effects_db = tmp_path / "effects.db"
    monkeypatch.setattr(support_jobs, "EFFECTS", str(effects_db))
    clock = start_clock()
    first = clock() + timedelta(minutes=1)
    half, poisoned = first + timedelta(minutes=1), first + timedelta(minutes=1)
    monkeypatch.setenv("CW_MIGRATE_HALF", format_window(half))
    monkeypatch.setenv("CW_MIGRATE_POISON", format_window(poisoned))
    src_provider, dst_provider = src.build(), dst.build()
    try:
        source = Side(src, src_provider, runner(src_provider, clock))
        destination = Side(dst, dst_provider, runner(dst_provider, clock))
        stepper = Stepper(clock, [source])
        stepper.step()  # window 1 on the source
        pausing.pause(source.runner.store, "held", reason="test", by="test", now=clock())
        stepper.step()  # window 2: the ledger fails half-way, poison is dead-lettered
        stepper.step()
        store = source.runner.store
        halfway = RunRecord.from_data(store.get(run_key_of("ledger", format_window(half))).data)
        assert halfway.state is RunState.FAILED, halfway
        assert source.runner.queue.dlq_depth() == 1

        dry = migrate(src, dst, tmp_path, effects_db, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "ledger: would move" in dry.stdout and "dead letters 1" in dry.stdout

        prepared = migrate(src, dst, tmp_path, effects_db, "--prepare")
        assert prepared.returncode == 0, prepared.stdout + prepared.stderr
        stepper.sides.append(destination)  # the destination's triggers and workers start
        # from now on (a duplicate of the half-done window's fire would run its retry early on a
        # broker without de-duplication: correct, but not the half-done ledger this is about)
        stepper.duplicates = duplicates
        stepper.start()
        wait_steps(stepper, 2)
        move(src, dst, tmp_path, effects_db, stepper)
        wait_steps(stepper, 3)
        stepper.stop()
        stepper.settle()
        last = clock()

        verified = migrate(src, dst, tmp_path, effects_db, "--verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        again = migrate(src, dst, tmp_path, effects_db)
        assert again.returncode == 0 and "already moved" in again.stdout, again.stdout

        return _check(tmp_path, effects_db, first, last, half, poisoned, source, destination)
    finally:
        src_provider.close()
        dst_provider.close()


def _windows(first: datetime, last: datetime) -> list[str]:
    out, when = [], first
    while when <= last:
        out.append(format_window(when))
        when += timedelta(minutes=1)
    return out


def _check(
    tmp_path: Path,
    effects_db: Path,
    first: datetime,
    last: datetime,
    half: datetime,
    poisoned: datetime,
    source: Side,
    destination: Side,
) -> dict[str, int]:
    windows = _windows(first, last)
    assert len(windows) >= 10
    ticks = Counter(item for item, _, _ in effects(effects_db, "tick"))
    items = Counter(item for item, _, _ in effects(effects_db, "item"))
    expected = {f"ledger:{w}/{n}" for w in windows for n in range(jobs_module.ITEMS)}
    figures = {
        "windows": len(windows),
        "duplicates": sum(n - 1 for n in (*ticks.values(), *items.values()) if n > 1),
        "losses": len({f"tick:{w}" for w in windows} - set(ticks)) + len(expected - set(items)),
    }
    # every window exactly once, on one side: 0 twice, 0 lost
    assert {k: n for k, n in ticks.items() if n > 1} == {}
    assert sorted(ticks) == [f"tick:{w}" for w in windows]
    # no ledger item done twice; every item of every window done
    assert {k: n for k, n in items.items() if n > 1} == {}
    assert set(items) == expected
    half_runs = {
        run
        for item, _, run in effects(effects_db, "item")
        if item.startswith(f"ledger:{format_window(half)}/")
    }
    assert len(half_runs) == 2  # half on the source, the rest taken over on the destination
    dst_store, src_store = destination.runner.store, source.runner.store
    taken = RunRecord.from_data(dst_store.get(run_key_of("ledger", format_window(half))).data)
    assert taken.state is RunState.SUCCEEDED and taken.fence >= 2
    # the dead letter moved; the source's queue is drained
    poison_text = format_window(poisoned)
    dead = RunRecord.from_data(dst_store.get(run_key_of("poison", poison_text)).data)
    assert dead.state is RunState.DEAD_LETTERED
    assert source.runner.queue.dlq_depth() == 0
    poisons = Counter(item for item, _, _ in effects(effects_db, "poison"))
    assert sorted(poisons) == [f"poison:{w}" for w in windows if w != poison_text]
    assert max(poisons.values()) == 1
    # the pause moved: nothing of `held` ran after it, and the destination excuses its windows
    held = [item for item, _, _ in effects(effects_db, "held")]
    assert held == [f"held:{windows[0]}"]
    status = dst_store.get(Key("status", "held"))
    assert status is not None and status.data.get("pause")
    excused = RunRecord.from_data(dst_store.get(run_key_of("held", windows[-1])).data)
    assert (excused.state, excused.excused) == (RunState.EXCUSED, "paused")
    # the source shows each job moved and where; its watcher is quiet
    jobs = source.runner.jobs
    clock = destination.runner.engine.settings.clock
    watcher = Watcher(jobs, src_store, source.runner.queue, notifiers=[], clock=clock)
    health, _ = watcher.evaluate(src_store.query("status"), clock(), None)
    for item in health:
        assert item.state_text.startswith(f"moved to {destination.spec.label}"), item.state_text
        assert item.conditions == {}
    # the destination accounts for every window: nothing missed
    watcher = Watcher(jobs, dst_store, destination.runner.queue, notifiers=[], clock=clock)
    health, _ = watcher.evaluate(dst_store.query("status"), clock(), None)
    for item in health:
        assert Condition.MISSED not in item.conditions, (item.job.name, item.conditions)
    by_job = {item.job.name: item for item in health}
    assert Condition.DEAD_LETTERS in by_job["poison"].conditions
    return figures
