"""The fence and the steps of a migration, in one process on two SQLite sides: a moved job's
claims are refused (``moved``, excused naming the destination, counters untouched); a
destination being filled in defers; a run in flight is waited for, or taken over from its
ledger; a pause moves; verify finds a difference; migrating back works the same."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest
from cronwarden.jobs import pause as pausing
from cronwarden.model.ports import Key, Update
from cronwarden.model.records import RunRecord, StatusRecord, run_key_of, status_key_of
from cronwarden.model.runs import RunState
from cronwarden.ops.migrate import Migration, Side
from cronwarden.ops.migrate_check import verify
from tests.support.harness import FakeClock, Harness, at, harness

W = at("2026-01-20T02:00Z")
HOUR = timedelta(hours=1)


class Gate:
    """The handler of ``slow`` blocks on ``release``; ``entered`` says it is running."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.done: list[str] = []


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def sides(tmp_path: Path, gate: Gate) -> Iterator[tuple[Harness, Harness, FakeClock]]:
    def tick(ctx: RunContext) -> None:
        gate.done.append(f"tick {ctx.run_key}")

    def slow(ctx: RunContext) -> None:
        for item in ctx.items([str(n) for n in range(4)], batch_size=1):
            if item.key == "2":
                gate.entered.set()
                assert gate.release.wait(30), "the test never released the handler"
            gate.done.append(f"{ctx.run_key}/{item.key}")

    clock = FakeClock(W)
    jobs = [
        cronwarden.job("tick", cron="0 * * * *", max_runtime="5m")(tick),
        cronwarden.job("slow", cron="0 * * * *", max_runtime="5m")(slow),
    ]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = harness(tmp_path / "a", jobs, clock=clock)
    b = harness(tmp_path / "b", jobs, clock=clock)
    yield a, b, clock
    a.close()
    b.close()


def _side(h: Harness, label: str) -> Side:
    return Side(label, h.store, h.queue)


def _migration(a: Harness, b: Harness, clock: FakeClock, **kw: object) -> Migration:
    return Migration(
        list(a.jobs),
        _side(a, "a"),
        _side(b, "b"),
        clock=clock,
        poll=0.02,
        **kw,  # type: ignore[arg-type]
    )


def test_a_moved_job_is_refused_on_the_source_and_runs_once_on_the_destination(
    sides: tuple[Harness, Harness, FakeClock], gate: Gate
) -> None:
    a, b, clock = sides
    assert a.engine.execute(RunRequest("tick", W)).kind is OutcomeKind.SUCCEEDED
    recorded = StatusRecord(a.store.get(status_key_of("tick")).data).windows_recorded  # type: ignore[union-attr]
    report = _migration(a, b, clock).run()
    assert not report.problems
    clock.advance(HOUR)
    refused = a.engine.execute(RunRequest("tick", W + HOUR))
    assert (refused.kind, refused.reason, refused.detail) == (
        OutcomeKind.SKIPPED,
        "moved",
        "moved to b",
    )
    excused = RunRecord.from_data(a.store.get(run_key_of("tick", "2026-01-20T03:00Z")).data)  # type: ignore[union-attr]
    assert (excused.state, excused.excused, excused.excused_detail) == (
        RunState.EXCUSED,
        "moved",
        "moved to b",
    )
    status = a.store.get(status_key_of("tick"))
    assert status is not None and StatusRecord(status.data).windows_recorded == recorded
    # the window already run is a duplicate on the destination; the new one runs there once
    assert b.engine.execute(RunRequest("tick", W)).kind is OutcomeKind.DUPLICATE
    assert b.engine.execute(RunRequest("tick", W + HOUR)).kind is OutcomeKind.SUCCEEDED
    assert gate.done == ["tick tick:2026-01-20T02:00Z", "tick tick:2026-01-20T03:00Z"]


def test_a_destination_being_filled_in_defers_and_writes_nothing(
    sides: tuple[Harness, Harness, FakeClock],
) -> None:
    a, b, clock = sides
    _migration(a, b, clock).prepare()
    outcome = b.engine.execute(RunRequest("tick", W))
    assert (outcome.kind, outcome.reason) == (OutcomeKind.DEFERRED, "moving_in")
    assert outcome.delay > 0
    assert b.store.get(run_key_of("tick", "2026-01-20T02:00Z")) is None
    # the source still runs until it is fenced
    assert a.engine.execute(RunRequest("tick", W)).kind is OutcomeKind.SUCCEEDED


def _run_in_thread(h: Harness, request: RunRequest) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(h.engine.execute(request)))
    thread.start()
    return thread, out


def test_the_fence_waits_for_a_run_in_flight(
    sides: tuple[Harness, Harness, FakeClock], gate: Gate
) -> None:
    a, b, clock = sides
    thread, out = _run_in_thread(a, RunRequest("slow", W))
    assert gate.entered.wait(10)
    said: list[str] = []
    migration = _migration(a, b, clock, wait=timedelta(seconds=30), say=said.append)
    mover = threading.Thread(target=migration.run)
    mover.start()
    end = time.monotonic() + 10
    while not any("waiting for the run in flight" in line for line in said):
        assert time.monotonic() < end, said
        time.sleep(0.02)
    gate.release.set()
    thread.join(10)
    mover.join(30)
    assert out[0].kind is OutcomeKind.SUCCEEDED  # type: ignore[attr-defined]
    moved = RunRecord.from_data(b.store.get(run_key_of("slow", "2026-01-20T02:00Z")).data)  # type: ignore[union-attr]
    assert moved.state is RunState.SUCCEEDED
    assert gate.done.count("slow:2026-01-20T02:00Z/3") == 1


def test_a_run_in_flight_past_the_wait_is_taken_over_from_its_ledger(
    sides: tuple[Harness, Harness, FakeClock], gate: Gate
) -> None:
    a, b, clock = sides
    thread, out = _run_in_thread(a, RunRequest("slow", W))
    assert gate.entered.wait(10)
    report = _migration(a, b, clock, wait=timedelta(seconds=0.1)).run()
    assert not report.problems
    gate.release.set()
    thread.join(10)
    assert out[0].kind is not OutcomeKind.SUCCEEDED  # type: ignore[attr-defined]  # fenced out
    # forwarded to the destination's queue: its worker takes the run over from the ledger
    deliveries = b.queue.receive(10, wait=1.0)
    assert [d.attributes.get("run_key") for d in deliveries] == ["slow:2026-01-20T02:00Z"]
    for delivery in deliveries:
        b.worker.handle(delivery)
    taken = RunRecord.from_data(b.store.get(run_key_of("slow", "2026-01-20T02:00Z")).data)  # type: ignore[union-attr]
    assert taken.state is RunState.SUCCEEDED and taken.fence >= 3
    done = Counter(d.rpartition("/")[2] for d in gate.done if d.startswith("slow:"))
    # items marked done never run again; the one the fenced-off owner was inside (pending,
    # uncertain) may be redone, with the same idempotency key
    assert (done["0"], done["1"], done["3"]) == (1, 1, 1)
    assert done["2"] in (1, 2)


def test_a_pause_moves_with_its_job(sides: tuple[Harness, Harness, FakeClock]) -> None:
    a, b, clock = sides
    pausing.pause(a.store, "tick", reason="quiet please", by="ops", now=clock())
    assert not _migration(a, b, clock).run().problems
    clock.advance(HOUR)
    outcome = b.engine.execute(RunRequest("tick", W + HOUR))
    assert (outcome.kind, outcome.reason) == (OutcomeKind.SKIPPED, "paused")
    status = b.store.get(status_key_of("tick"))
    assert status is not None and status.data["pause"]["reason"] == "quiet please"


def test_verify_finds_a_difference(sides: tuple[Harness, Harness, FakeClock]) -> None:
    a, b, clock = sides
    a.engine.execute(RunRequest("tick", W))
    assert not _migration(a, b, clock).run().problems
    checks = verify(list(a.jobs), _side(a, "a"), _side(b, "b"), now=clock())
    assert [c.differences for c in checks] == [[], []]
    record = b.store.get(run_key_of("tick", "2026-01-20T02:00Z"))
    assert record is not None
    b.store.commit([Update(record.key, {**record.data, "error": "tampered"}, record.version)])
    checks = verify(list(a.jobs), _side(a, "a"), _side(b, "b"), now=clock())
    by_job = {c.job: c.differences for c in checks}
    assert by_job == {"tick": ["run 2026-01-20T02:00Z: different on destination"], "slow": []}


def test_migrating_back_works_the_same(
    sides: tuple[Harness, Harness, FakeClock], gate: Gate
) -> None:
    a, b, clock = sides
    a.engine.execute(RunRequest("tick", W))
    assert not _migration(a, b, clock).run().problems
    clock.advance(HOUR)
    assert a.engine.execute(RunRequest("tick", W + HOUR)).reason == "moved"
    assert b.engine.execute(RunRequest("tick", W + HOUR)).kind is OutcomeKind.SUCCEEDED
    back = Migration(list(a.jobs), _side(b, "b"), _side(a, "a"), clock=clock, poll=0.02)
    assert not back.run().problems
    clock.advance(HOUR)
    assert b.engine.execute(RunRequest("tick", W + 2 * HOUR)).reason == "moved"
    assert a.engine.execute(RunRequest("tick", W + 2 * HOUR)).kind is OutcomeKind.SUCCEEDED
    # the window the destination ran came back as it ran there, not as excused
    back_there = RunRecord.from_data(a.store.get(run_key_of("tick", "2026-01-20T03:00Z")).data)  # type: ignore[union-attr]
    assert back_there.state is RunState.SUCCEEDED
    assert gate.done == [f"tick tick:2026-01-20T0{h}:00Z" for h in (2, 3, 4)]
    status = a.store.get(Key("status", "tick"))
    assert status is not None and "moved" not in status.data
    assert not verify(list(a.jobs), _side(b, "b"), _side(a, "a"), now=clock())[0].differences
