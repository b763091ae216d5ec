"""The five ledger cases of issue 13, on every store through :class:`FaultyStore` (SQLite,
memory, and the emulator-backed stores when their marks are selected).

Each test counts side effects per item key: a done item is never repeated, an item never done
is never lost (the retry does it), only an item whose side effect may have started is ever
pending after a failure.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest, Uncertain
from cronwarden.jobs import JobSet
from cronwarden.model.ports import ITEM, LOCK, RUN, Delete, Key, Op, Store
from cronwarden.model.records import StatusRecord, status_key_of
from cronwarden.run.engine import Engine, EngineSettings
from cronwarden.run.ledger import read_items
from cronwarden.testing.faults import UNAVAILABLE, UNKNOWN, Fault, FaultyStore, marks
from tests.backends import MARKS, STORES
from tests.support.harness import at

W = at("2026-01-20T02:00Z")
WINDOW = "2026-01-20T02:00Z"


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in STORES])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with STORES[request.param](request, tmp_path) as made:
        yield made


def both(*matchers: Callable[[str, Sequence[Op]], bool]) -> Callable[[str, Sequence[Op]], bool]:
    return lambda operation, ops: all(m(operation, ops) for m in matchers)


def renewal(operation: str, ops: Sequence[Op]) -> bool:
    """A lease write carrying nothing but the run and the lock."""
    return operation == "commit" and len(ops) == 2 and ops[0].key.kind == RUN


def completion(operation: str, ops: Sequence[Op]) -> bool:
    """The run's last commit: it deletes the lock."""
    return operation == "commit" and any(isinstance(o, Delete) and o.key.kind == LOCK for o in ops)


class Fanout:
    """A job over ``items`` recording every side effect, with a hook to fail on purpose."""

    def __init__(self, items: int = 10, fail_at: str | None = None) -> None:
        self.items = [f"i{n}" for n in range(items)]
        self.effects: Counter[str] = Counter()
        self.uncertain: list[str] = []
        self.fail_at = fail_at

    def __call__(self, ctx: RunContext) -> None:
        for item in ctx.items(self.items):
            if item.uncertain:
                self.uncertain.append(item.key)
            if item.key == self.fail_at:
                self.fail_at = None
                raise RuntimeError(f"boom at {item.key}")
            self.effects[item.key] += 1


def engine_for(store: Store, handler: Callable[[RunContext], None], **settings: object) -> Engine:
    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(handler)
    options: dict[str, object] = {"batch_size": 5, "store_retry_for": 0.3, **settings}
    return Engine(JobSet([job]), store, EngineSettings(**options))  # type: ignore[arg-type]


def run_until_done(engine: Engine, attempts: int = 5) -> list[OutcomeKind]:
    kinds = []
    for _ in range(attempts):
        outcome = engine.execute(RunRequest("fan", W))
        kinds.append(outcome.kind)
        if outcome.kind is OutcomeKind.SUCCEEDED:
            return kinds
    return kinds


def item_states(store: Store) -> dict[str, str]:
    found = read_items(store.query(ITEM, "fan", prefix=f"{WINDOW}/"))
    return {key: view.item.state for key, view in found.items()}


# -- case 1: a transient store error on a ledger batch commit ---------------------------------
def test_unavailable_batch_commit_keeps_done_marks_for_the_failure_commit(store: Store) -> None:
    """The batch commit that marks i0-i4 done fails past the retry budget: the run fails, the
    failure commit carries the done marks, the retry does only i5-i9."""
    job = Fanout()
    faulty = FaultyStore(
        store, [Fault(UNAVAILABLE, match=both(marks("done"), marks("pending")), times=1000)]
    )
    engine = engine_for(faulty, job)
    first = engine.execute(RunRequest("fan", W))
    assert first.kind is OutcomeKind.FAILED and first.reason == "StoreUnavailable"
    assert item_states(store) == {
        **{f"i{n}": "done" for n in range(5)},
        **{f"i{n}": "released" for n in range(5, 10)},
    }
    faulty.plan.clear()
    assert run_until_done(engine) == [OutcomeKind.SUCCEEDED]
    assert job.effects == Counter({key: 1 for key in job.items})
    assert job.uncertain == []


def test_transient_unavailability_is_retried_inside_the_run(store: Store) -> None:
    job = Fanout()
    faulty = FaultyStore(store, [Fault(UNAVAILABLE, match=marks("done"), times=2)])
    engine = engine_for(faulty, job, store_retry_for=30.0)
    assert run_until_done(engine) == [OutcomeKind.SUCCEEDED]
    assert len(faulty.injected) == 2
    assert job.effects == Counter({key: 1 for key in job.items})


# -- case 2: a commit that lands but reports an error -------------------------------------------
@pytest.mark.parametrize("uncertain", [Uncertain.REDO, Uncertain.QUARANTINE])
@pytest.mark.parametrize("after", [True, False], ids=["landed", "not-landed"])
def test_unknown_outcome_batch_commit_is_read_back(
    store: Store, uncertain: Uncertain, after: bool
) -> None:
    job = Fanout()
    faulty = FaultyStore(
        store, [Fault(UNKNOWN, after=after, match=both(marks("done"), marks("pending")))]
    )
    engine = engine_for(faulty, job, uncertain=uncertain, store_retry_for=30.0)
    outcome = engine.execute(RunRequest("fan", W))
    assert outcome.kind is OutcomeKind.SUCCEEDED and outcome.reason == ""
    assert faulty.injected == [("commit", UNKNOWN, after)]
    assert job.effects == Counter({key: 1 for key in job.items})
    assert job.uncertain == [] and "items_quarantined" not in outcome.counters
    assert set(item_states(store).values()) == {"done"}


def test_unknown_outcome_completion_is_read_back(store: Store) -> None:
    job = Fanout()
    faulty = FaultyStore(store, [Fault(UNKNOWN, after=True, match=completion)])
    engine = engine_for(faulty, job, store_retry_for=30.0)
    assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.SUCCEEDED
    assert faulty.injected == [("commit", UNKNOWN, True)]
    run = store.get(Key(RUN, "fan", WINDOW))
    assert run is not None and run.data["state"] == "succeeded"
    assert set(item_states(store).values()) == {"done"}


# -- case 3: two loops, the first broken early, the second raising ------------------------------
@pytest.mark.parametrize("uncertain", [Uncertain.REDO, Uncertain.QUARANTINE])
def test_each_loop_releases_its_never_started_items(store: Store, uncertain: Uncertain) -> None:
    effects: Counter[str] = Counter()
    flagged: list[str] = []
    state = {"attempt": 0}

    def handler(ctx: RunContext) -> None:
        state["attempt"] += 1
        for item in ctx.items([f"a{n}" for n in range(10)]):
            effects[item.key] += 1
            flagged.extend([item.key] if item.uncertain else [])
            if item.key == "a2" and state["attempt"] == 1:
                break
        for item in ctx.items([f"b{n}" for n in range(10)]):
            flagged.extend([item.key] if item.uncertain else [])
            if item.key == "b3" and state["attempt"] == 1:
                raise RuntimeError("boom at b3")
            effects[item.key] += 1

    engine = engine_for(store, handler, uncertain=uncertain)
    assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.FAILED
    states = item_states(store)
    # only started items: a2 (broken out of while yielded) and b3 (raised)
    assert [k for k, s in states.items() if s == "pending"] == ["a2", "b3"]
    assert {states[f"a{n}"] for n in range(3, 5)} == {"released"}
    assert {states[f"b{n}"] for n in range(4, 5)} == {"released"}
    second = engine.execute(RunRequest("fan", W))
    assert second.kind is OutcomeKind.SUCCEEDED
    if uncertain is Uncertain.REDO:
        assert flagged == ["a2", "b3"]
        assert second.reason == ""
    else:
        assert flagged == [] and second.reason == "quarantined"
        assert "a2, b3" in second.detail
        status = store.get(status_key_of("fan"))
        assert status is not None
        assert StatusRecord.from_data(status.data).quarantined == {WINDOW: ["a2", "b3"]}
    # a2 was broken out of (its loop never moved past it): uncertain, redone (same
    # idempotency key) or quarantined; never silently lost
    assert effects["a2"] == (2 if uncertain is Uncertain.REDO else 1)
    assert effects["a0"] == effects["a1"] == 1
    for n in range(3, 10):
        assert effects[f"a{n}"] == 1
    for n in (0, 1, 2, 4, 5, 6, 7, 8, 9):
        assert effects[f"b{n}"] == 1


# -- case 4: a lease renewal whose reply is lost -------------------------------------------------
@pytest.mark.parametrize("after", [True, False], ids=["landed", "not-landed"])
def test_renewal_of_unknown_outcome_keeps_the_lease(store: Store, after: bool) -> None:
    renewed = threading.Event()

    def handler(ctx: RunContext) -> None:
        lease = ctx._lease
        deadline = threading.Event()
        timer = threading.Timer(20.0, deadline.set)
        timer.start()
        try:
            while lease.renewals < 2 and not deadline.is_set():
                ctx.sleep(0.02)
        finally:
            timer.cancel()
        if lease.renewals >= 2:
            renewed.set()

    faulty = FaultyStore(store, [Fault(UNKNOWN, after=after, match=renewal)])
    # 3 s: two renewals (every 0.4 s) must fit in the max runtime even on a slow emulator
    # under load (1 s was exceeded there once: the run was cancelled, not renewed)
    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="3s")(handler)
    engine = Engine(
        JobSet([job]),
        faulty,
        EngineSettings(lease_margin=timedelta(seconds=1), renew_fraction=0.1, store_retry_for=5.0),
    )
    outcome = engine.execute(RunRequest("fan", W))
    assert outcome.kind is OutcomeKind.SUCCEEDED, outcome
    assert renewed.is_set()
    assert faulty.injected[0] == ("commit", UNKNOWN, after)


def test_marks_are_whole_records_when_released(store: Store) -> None:
    """A released mark may replace a pending mark that never landed: it is a whole record
    (since ledger pages: a whole page, with every item's key, fingerprint and state)."""
    job = Fanout()
    faulty = FaultyStore(store, [Fault(UNAVAILABLE, match=marks("pending"), times=1000)])
    engine = engine_for(faulty, job)
    assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.FAILED
    for record in store.query(ITEM, "fan"):
        assert {"keys", "fps", "states", "run_id"} <= set(record.data)
    faulty.plan.clear()
    assert run_until_done(engine) == [OutcomeKind.SUCCEEDED]
    assert job.effects == Counter({key: 1 for key in job.items})


# -- a batch write is fenced by the run record alone (Lease.mark) ------------------------------
def test_a_takeover_between_batches_refuses_the_next_batch_write(store: Store) -> None:
    """Another owner takes the run over after the first batch (it writes the run record with
    a higher fence): the next batch's write, which does not touch the lock, is refused all
    the same; its page never lands and none of its items is yielded."""
    from cronwarden.model.ports import Update
    from cronwarden.model.records import RunRecord, run_key_of

    yielded: list[str] = []

    def handler(ctx: RunContext) -> None:
        for item in ctx.items([f"i{n}" for n in range(10)]):
            yielded.append(item.key)
            if item.key == "i4":  # the first batch's page is written: a takeover now
                key = run_key_of("fan", WINDOW)
                stored = store.get(key)
                assert stored is not None
                run = RunRecord.from_data(stored.data)
                taken = run.with_(owner="thief", fence=run.fence + 1, run_id="thief-run")
                store.commit([Update(key, taken.to_data(), stored.version)])

    outcome = engine_for(store, handler).execute(RunRequest("fan", W))
    assert outcome.kind is OutcomeKind.LEASE_LOST
    assert yielded == [f"i{n}" for n in range(5)]
    # only the first batch's page: the second never landed (its marks stay pending: a dead
    # owner's, uncertain to whoever resumes)
    assert item_states(store) == {f"i{n}": "pending" for n in range(5)}
