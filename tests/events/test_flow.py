"""Dependencies and event-keyed consumers end to end, on the local provider and on every cloud
emulator stack (the store and queue of one provider, real SDKs): a chain A -> B -> C, the crash
between A's completion commit and its publish (the outbox sweep repairs it), a fan-in, an
upstream that fails (its dependent waits, ``status`` says so, the watcher does not call it
missed), ``missed`` once the upstream succeeded and the dependent did not, and consumers (one
run per event key, a malformed event dead-lettered with the reason, consumer liveness)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import (
    Engine,
    JobSet,
    OutcomeKind,
    PermanentError,
    RunContext,
    RunRequest,
    Worker,
)
from cronwarden.cli.views import status_row
from cronwarden.model import format_window
from cronwarden.model.ports import OUTBOX, STATUS, Publisher, Queue, Store
from cronwarden.model.records import RunRecord, run_key_of
from cronwarden.run.claiming import Claim
from cronwarden.run.dependencies import OutboxSweep, dependent_request, publish_completion
from cronwarden.watch.watcher import Condition, Watcher
from tests.backends import MARKS, QUEUES, STORES

STACKS = {  # provider: (store, queue) as its host builds them
    "local": ("sqlite", "sqlite"),
    "postgres": ("postgres", "postgres"),
    "gcp": ("firestore", "pubsub"),
    "azure": ("table", "servicebus"),
    "aws": ("dynamodb", "sqs"),
    "redis": ("redis", "redis"),
}
# recent windows of the hourly upstreams (the watcher accounts for the last 30 days)
W = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
W2 = W + timedelta(hours=1)
T, T2 = format_window(W), format_window(W2)


@pytest.fixture(
    params=[
        pytest.param(name, marks=MARKS[store] + MARKS[queue])
        for name, (store, queue) in STACKS.items()
    ]
)
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Queue]]:
    store_name, queue_name = STACKS[request.param]
    with (
        STORES[store_name](request, tmp_path) as store,
        QUEUES[queue_name](request, tmp_path, max_deliveries=5) as queue,
    ):
        yield store, queue


class Ran:
    """What the handlers did: run keys and windows, in order; which jobs must fail."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.windows: dict[str, datetime] = {}
        self.payloads: dict[str, Any] = {}
        self.failing: set[str] = set()

    def handler(self, ctx: RunContext) -> None:
        if ctx.job.name in self.failing:
            raise PermanentError(f"{ctx.job.name} is broken")
        self.keys.append(ctx.run_key)
        self.windows[ctx.run_key] = ctx.window
        self.payloads[ctx.run_key] = ctx.payload


def _jobs(ran: Ran) -> JobSet:
    hourly = {"cron": "0 * * * *", "max_runtime": "1m"}
    return JobSet(
        [
            cronwarden.job("a", **hourly)(ran.handler),
            cronwarden.job("e", **hourly)(ran.handler),
            cronwarden.job("p", **hourly)(ran.handler),  # plain: no dependents
            cronwarden.job("b", after="a", max_runtime="1m")(ran.handler),
            cronwarden.job("c", after="b", max_runtime="1m")(ran.handler),
            cronwarden.job("d", after=["a", "e"], max_runtime="1m")(ran.handler),
        ],
        [
            cronwarden.consumer(
                "invoice-render",
                key=lambda e: e["invoice_id"],
                max_runtime="1m",
                schema={"type": "object", "required": ["invoice_id"]},
            )(ran.handler)
        ],
    )


def drain(worker: Worker, *, until: Any = None, deadline: float = 60.0) -> None:
    """Poll until ``until()`` holds (or, without it, until the queue stays empty for 1 s)."""
    give_up = time.monotonic() + deadline
    quiet_since = time.monotonic()
    while time.monotonic() < give_up:
        if worker.poll(max_messages=10, wait=0.5):
            quiet_since = time.monotonic()
        elif until is not None:
            if until():
                return
        elif time.monotonic() - quiet_since > 1.0:
            return
    raise AssertionError("the queue did not settle in time")


class Down(Publisher):
    """A broker that is not there: what a crash right after the commit leaves unpublished."""

    def publish(self, body: bytes, **_: Any) -> None:
        raise ConnectionError("broker unreachable")


def _state(store: Store, job: str, window: str) -> str | None:
    record = store.get(run_key_of(job, window))
    return None if record is None else RunRecord.from_data(record.data).state.value


def test_chain_and_the_crash_between_commit_and_publish(stack: tuple[Store, Queue]) -> None:
    store, queue = stack
    ran = Ran()
    jobs = _jobs(ran)
    engine = Engine(jobs, store)
    worker = Worker(engine, queue)

    # A -> B -> C: each completion publishes the next; run keys are A's window
    queue.publish(RunRequest("a", W).to_json(), dedup_id="a:W")
    drain(worker, until=lambda: f"c:{T}" in ran.keys)
    assert ran.keys == [f"a:{T}", f"b:{T}", f"c:{T}"]
    assert ran.windows[f"c:{T}"] == W
    assert ran.payloads[f"b:{T}"] == {}  # the same payload from any sender: never "mismatch"
    b_run = store.get(run_key_of("b", T))
    assert b_run is not None and b_run.data["reason"] == "after:a"

    # A's completion commit wrote the outbox record; the publish after it "crashed"
    crashed = Worker(engine, queue, publisher=Down())
    queue.publish(RunRequest("a", W2).to_json(), dedup_id="a:W2")
    drain(crashed, until=lambda: _state(store, "a", T2) == "succeeded")
    assert f"b:{T2}" not in ran.keys
    left = {r.key.id for r in store.query(OUTBOX, "a")}
    assert f"{T2}/b" in left

    # the sweep publishes what is left, twice: the run key makes the second one harmless
    sweep = OutboxSweep(jobs, queue, min_age=timedelta(0))
    assert sweep.sweep(store, engine.now()) == 1
    assert sweep.sweep(store, engine.now()) == 1
    drain(worker, until=lambda: f"c:{T2}" in ran.keys)
    drain(worker)
    assert ran.keys.count(f"b:{T2}") == 1
    assert ran.keys.count(f"c:{T2}") == 1
    # once the dependents have run records, the sweep deletes the outbox and publishes nothing
    assert sweep.sweep(store, engine.now()) == 0
    # except d's: d also runs after e, which has not run; e's completion publishes d
    assert {r.key.id for r in store.query(OUTBOX, "a")} == {
        f"{T}/d",
        f"{T2}/d",
    }
    assert store.query(OUTBOX, "b") == []


def test_fan_in_and_a_failing_upstream(stack: tuple[Store, Queue]) -> None:
    store, queue = stack
    ran = Ran()
    jobs = _jobs(ran)
    engine = Engine(jobs, store)
    worker = Worker(engine, queue)
    first_seen = W - timedelta(minutes=1)
    Watcher(jobs, store, notifiers=[], clock=lambda: first_seen, hooks=[]).check()

    # fan-in: d runs once, after both a and e succeeded (two completions, one run)
    for name in ("a", "e"):
        queue.publish(RunRequest(name, W).to_json(), dedup_id=f"{name}:W")
    drain(worker, until=lambda: f"d:{T}" in ran.keys)
    drain(worker)
    assert ran.keys.count(f"d:{T}") == 1
    assert queue.dlq_depth() == 0  # the other upstream's request is a duplicate, not a reject

    # a fails (dead-lettered): d and b do not run for that window, status says they wait on a
    ran.failing.add("a")
    for name in ("a", "e"):
        queue.publish(RunRequest(name, W2).to_json(), dedup_id=f"{name}:W2")
    drain(worker, until=lambda: _state(store, "a", T2) == "dead_lettered")
    drain(worker)
    assert _state(store, "e", T2) == "succeeded"
    assert _state(store, "d", T2) is None
    assert _state(store, "b", T2) is None
    later = W2 + timedelta(hours=3)
    watcher = Watcher(jobs, store, notifiers=[], clock=lambda: later, hooks=[])
    health = {h.job.name: h for h in watcher.evaluate(store.query(STATUS), later, None)[0]}
    assert "waits on a (dead_lettered)" in status_row(health["d"])["state"]
    assert "waits on a (dead_lettered)" in status_row(health["b"])["state"]
    assert status_row(health["d"])["schedule"] == "after a, e"
    # a's own alert fires; its dependents are not "missed" for a window a did not succeed in
    assert Condition.DEAD_LETTERS in health["a"].conditions
    assert Condition.MISSED not in health["d"].conditions
    assert Condition.MISSED not in health["b"].conditions


def test_missed_when_the_upstream_succeeded_and_the_dependent_did_not(
    stack: tuple[Store, Queue],
) -> None:
    store, queue = stack
    ran = Ran()
    jobs = _jobs(ran)
    engine = Engine(jobs, store)
    first_seen = W - timedelta(minutes=1)
    Watcher(jobs, store, notifiers=[], clock=lambda: first_seen, hooks=[]).check()
    # a succeeds; b's request is lost and nothing sweeps: b must not stay quiet
    lost = Worker(engine, queue, publisher=Down())
    queue.publish(RunRequest("a", W).to_json(), dedup_id="a:W")
    drain(lost, until=lambda: _state(store, "a", T) == "succeeded")
    done = RunRecord.from_data(store.get(run_key_of("a", T)).data)  # type: ignore[union-attr]
    assert done.finished_at is not None

    def conditions(when: datetime) -> dict[str, set[Condition]]:
        watcher = Watcher(jobs, store, notifiers=[], clock=lambda: when, hooks=[])
        health = watcher.evaluate(store.query(STATUS), when, None)[0]
        return {h.job.name: set(h.conditions) for h in health}

    # within b's grace (one interval after a's success) b is not missed
    assert Condition.MISSED not in conditions(done.finished_at + timedelta(minutes=30))["b"]
    late = conditions(done.finished_at + timedelta(hours=1, minutes=1))
    assert Condition.MISSED in late["b"]
    assert Condition.MISSED not in late["c"]  # c waits on b


class Counting(Publisher):
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def publish(self, body: bytes, **_: Any) -> None:
        self.bodies.append(body)


def test_round_trips_a_dependency_adds(stack: tuple[Store, Queue]) -> None:
    """A's outbox rides in its completion commit: a job with dependents costs the store
    round trips of a plain job, plus one publish per dependent; a dependent with one upstream
    costs a plain run; a fan-in dependent one read per other upstream."""
    store = stack[0]
    jobs = _jobs(Ran())
    engine = Engine(jobs, store)

    def trips(request: RunRequest) -> int:
        before = store.round_trips
        assert engine.execute(request).kind is OutcomeKind.SUCCEEDED
        return store.round_trips - before

    plain, upstream = trips(RunRequest("p", W)), trips(RunRequest("a", W))
    sent = Counting()
    assert publish_completion(sent, jobs, jobs["a"], W) == 2  # b and d
    single = trips(dependent_request("b", "a", W))
    trips(RunRequest("e", W))
    fan_in = trips(dependent_request("d", "e", W))
    before = store.round_trips
    published = len(sent.bodies)
    sweep = OutboxSweep(jobs, sent, min_age=timedelta(0))
    # a/b, a/d, e/d deleted (their dependents ran); b/c published (c has not run)
    assert sweep.sweep(store, engine.now()) == 1 and sweep.deleted == 3
    swept = store.round_trips - before
    print(
        f"\n{store.__class__.__name__}: plain job {plain} store round trips; with 2 "
        f"dependents {upstream} + {published} publishes; dependent (1 upstream) "
        f"{single}; fan-in (2 upstreams) {fan_in}; sweep of 4 records "
        f"(3 deleted, 1 published) {swept}"
    )
    assert upstream == plain and single == plain and fan_in == plain + 1


def test_consumer_runs_once_per_key_and_dead_letters_malformed(
    stack: tuple[Store, Queue],
) -> None:
    store, queue = stack
    ran = Ran()
    jobs = _jobs(ran)
    worker = Worker(Engine(jobs, store), queue)
    for _ in range(3):
        assert (
            cronwarden.publish("invoice-render", {"invoice_id": "inv-1"}, publisher=queue)
            == "invoice-render:e:inv-1"
        )
    cronwarden.publish("invoice-render", {"invoice_id": "inv 2/x"}, publisher=queue)
    with pytest.raises(cronwarden.MalformedEvent, match="required property"):
        cronwarden.publish("invoice-render", {"id": 3}, publisher=queue)
    raw = {  # a producer that skipped the check
        "v": 1,
        "kind": "event",
        "consumer": "invoice-render",
        "key": "3",
        "run_key": "invoice-render:e:3",
        "event": {"id": 3},
        "published_at": "2026-01-20T02:00:00+00:00",
    }
    queue.publish(
        json.dumps(raw).encode(), attributes={"consumer": "invoice-render", "kind": "event"}
    )
    drain(worker, until=lambda: len(ran.keys) >= 2 and queue.dlq_depth() >= 1)
    drain(worker)
    hashed = [k for k in ran.keys if k.startswith("invoice-render:h:")]
    assert sorted(k for k in ran.keys if k not in hashed) == ["invoice-render:e:inv-1"]
    assert len(hashed) == 1 and ran.payloads[hashed[0]] == {"invoice_id": "inv 2/x"}
    record = store.get(run_key_of("invoice-render", "e:inv-1"))
    assert record is not None and record.data["state"] == "succeeded"
    letters = queue.dlq_peek(10)
    assert len(letters) == 1
    assert "does not match the schema at $: 'invoice_id' is a required property" in (
        letters[0].description + letters[0].reason
    )
    report = Watcher(jobs, store, queue, notifiers=[], hooks=[]).check()
    assert any(
        a.job == "invoice-render" and a.kind is Condition.DEAD_LETTERS for a in report.active
    )


def test_consumer_overlap_is_per_key_and_failures_retry(tmp_path: Path) -> None:
    """Local only (the claim and settlement are the same code on every stack): two keys run
    side by side, and a failing event is retried then dead-lettered like a window."""
    from cronwarden.adapters.local import SQLiteQueue, SQLiteStore

    store = SQLiteStore(str(tmp_path / "s.db"))
    queue = SQLiteQueue(str(tmp_path / "q.db"), max_deliveries=5)
    seen: list[str] = []

    def handler(ctx: RunContext) -> None:
        seen.append(ctx.run_key)
        if ctx.payload["n"] == 2:
            raise RuntimeError("cannot render")

    declared = cronwarden.consumer(
        "render",
        key="n",
        max_runtime="1m",
        retry=cronwarden.Retry(max_attempts=2, min_backoff="0s", max_backoff="0s"),
        at_least=(5, "1h"),
    )(handler)
    jobs = JobSet([], [declared])
    engine = Engine(jobs, store)
    job = jobs.consumer_job("render")
    assert job is not None
    held = engine.claim(job, RunRequest("render", W, payload={"n": 5}, slot="e:5"))
    assert isinstance(held, Claim)  # key 5 runs (its lock held) ...
    other = engine.execute(RunRequest("render", W, payload={"n": 6}, slot="e:6"))
    assert other.kind is OutcomeKind.SUCCEEDED  # ... and key 6 runs beside it
    same = engine.execute(RunRequest("render", W, payload={"n": 5}, slot="e:5"))
    assert same.kind is OutcomeKind.IN_PROGRESS  # a copy of key 5 waits for it
    cronwarden.publish(declared, {"n": 3}, publisher=queue)
    cronwarden.publish(declared, {"n": 2}, publisher=queue)
    worker = Worker(engine, queue)
    drain(worker, until=lambda: queue.dlq_depth() == 1)
    assert seen.count("render:e:3") == 1 and seen.count("render:e:2") == 2
    assert store.get(run_key_of("render", "e:2")).data["state"] == "dead_lettered"  # type: ignore[union-attr]
    # liveness: the dead letter, and the at_least quota once its interval passed
    now = engine.now()
    watcher = Watcher(jobs, store, queue, notifiers=[], hooks=[], clock=lambda: now)
    first = {a.kind for a in watcher.check().active if a.job == "render"}
    assert first == {Condition.DEAD_LETTERS}
    later = now + timedelta(hours=1, minutes=1)
    watcher.clock = lambda: later
    second = {a.kind for a in watcher.check().active if a.job == "render"}
    assert Condition.MISSED in second
    store.close()
    queue.close()


def test_declarations_fail_at_import_with_one_line() -> None:
    noop = Ran().handler
    with pytest.raises(cronwarden.InvalidJobDefinition, match="exclude each other"):
        cronwarden.job("b", after="a", cron="0 * * * *", max_runtime="1m")
    a = cronwarden.job("a", cron="0 * * * *", max_runtime="1m")(noop)
    with pytest.raises(cronwarden.InvalidJobDefinition, match=r"^b: after 'x': no such job"):
        JobSet([a, cronwarden.job("b", after="x", max_runtime="1m")(noop)])
    with pytest.raises(cronwarden.InvalidJobDefinition, match="dependency cycle: "):
        JobSet(
            [
                a,
                cronwarden.job("b", after=["a", "c"], max_runtime="1m")(noop),
                cronwarden.job("c", after="b", max_runtime="1m")(noop),
            ]
        )
    daily = cronwarden.job("z", cron="0 2 * * *", max_runtime="1m")(noop)
    with pytest.raises(cronwarden.InvalidJobDefinition, match="share one schedule"):
        JobSet([a, daily, cronwarden.job("y", after=["a", "z"], max_runtime="1m")(noop)])
    jobs = JobSet([a, cronwarden.job("b", after="a", max_runtime="1m")(noop)])
    assert jobs["b"].schedule == a.schedule and not jobs["b"].timed
    assert cronwarden.Trigger(jobs, Down()).tick("b", W) == []  # never fired by time
