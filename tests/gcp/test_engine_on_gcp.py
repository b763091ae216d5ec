"""The core engine and worker on Firestore + Pub/Sub (emulators): the happy path's round trips
and RPCs, and a malformed message dead-lettered at once with its reason attribute."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

import cronwarden
from cronwarden import (
    Engine,
    EngineSettings,
    JobSet,
    OutcomeKind,
    RunContext,
    RunRequest,
    Trigger,
    Worker,
)
from cronwarden.adapters.gcp import FirestoreStore, PubSubQueue
from cronwarden.model.ports import ITEM, REASON_ATTRIBUTE, RUN, STATUS, Key
from cronwarden.run.ledger import item_records

from .test_firestore_store import count_rpcs, raw

pytestmark = pytest.mark.gcp
WINDOW = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


def jobs(calls: list[str]) -> JobSet:
    @cronwarden.job("hourly", cron="0 * * * *", max_runtime="5m")
    def hourly(ctx: RunContext) -> None:
        calls.append(ctx.run_key)

    return JobSet([hourly])


def test_happy_path_is_two_commits_on_firestore(fs_store: FirestoreStore) -> None:
    calls: list[str] = []
    engine = Engine(jobs(calls), fs_store)
    rpcs = count_rpcs(fs_store)
    before = fs_store.round_trips
    outcome = engine.execute(RunRequest("hourly", WINDOW))
    assert outcome.kind is OutcomeKind.SUCCEEDED and len(calls) == 1
    assert fs_store.round_trips - before == 2
    assert rpcs == {"commit": 2}
    run = Key(RUN, "hourly", "2026-01-20T02:00Z")
    assert fs_store.get(run).data["state"] == "succeeded"  # type: ignore[union-attr]
    assert "expire_at" in raw(fs_store, run)
    assert fs_store.get(Key(STATUS, "hourly")).data["status"] == "succeeded"  # type: ignore[union-attr]
    duplicate = engine.execute(RunRequest("hourly", WINDOW))
    assert duplicate.kind is not OutcomeKind.SUCCEEDED and len(calls) == 1


def test_worker_runs_a_published_request_and_dead_letters_malformed_input(
    fs_store: FirestoreStore, make_queue: Callable[..., PubSubQueue]
) -> None:
    calls: list[str] = []
    jobset = jobs(calls)
    queue = make_queue()
    worker = Worker(Engine(jobset, fs_store), queue)
    Trigger(jobset, queue).tick("hourly", WINDOW)
    queue.publish(b"{not json", attributes={"job": "hourly"})
    end = time.monotonic() + 30
    while (len(calls) < 1 or queue.dlq_depth() < 1) and time.monotonic() < end:
        for delivery in queue.receive(10, visibility=60, wait=1.0):
            worker.handle(delivery)
    assert calls == ["hourly:2026-01-20T02:00Z"]
    (dead,) = queue.dlq_peek()
    assert dead.reason == "MalformedRequest" and dead.body == b"{not json"
    raw_attrs = dict(queue._pull(queue.dead_letter_subscription, 10)[0].message.attributes)
    assert raw_attrs[REASON_ATTRIBUTE] == "MalformedRequest"


def test_ledger_batches_are_one_commit_each_on_firestore(fs_store: FirestoreStore) -> None:
    def fan(ctx: RunContext) -> None:
        for item in ctx.items(range(250)):
            assert item.idempotency_key

    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(fan)
    engine = Engine(JobSet([job]), fs_store, EngineSettings(batch_size=100))
    rpcs = count_rpcs(fs_store)
    outcome = engine.execute(RunRequest("fan", WINDOW))
    assert outcome.kind is OutcomeKind.SUCCEEDED
    assert fs_store.round_trips == 2 + 3  # claim, 3 ledger batches, complete
    assert rpcs == {"commit": 5}
    items = item_records(fs_store, "fan")
    assert len(items) == 250 and {r.data["state"] for r in items} == {"done"}
    assert all("expire_at" in raw(fs_store, r.key) for r in fs_store.query(ITEM, "fan"))
