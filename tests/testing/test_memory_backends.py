"""What MemoryStore and MemoryQueue add beyond the conformance suite (which they also pass)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwarden.model.errors import CommitConflict
from cronwarden.model.ports import RUN, STATUS, Create, Key, Merge, Queue, Store
from cronwarden.testing import FakeClock, MemoryQueue, MemoryStore

RUN_KEY = Key(RUN, "job", "2026-01-20T02:00Z")


def test_store_returns_copies_not_the_stored_data() -> None:
    store = MemoryStore()
    data = {"nested": {"n": 1}}
    store.commit([Create(RUN_KEY, data)])
    data["nested"]["n"] = 2
    record = store.get(RUN_KEY)
    assert record is not None and record.data == {"nested": {"n": 1}}
    record.data["nested"]["n"] = 3
    again = store.get(RUN_KEY)
    assert again is not None and again.data == {"nested": {"n": 1}}


def test_store_refuses_non_json_values_like_a_real_store_and_applies_nothing() -> None:
    store = MemoryStore()
    with pytest.raises(ValueError, match="not a JSON type"):
        store.commit([Create(RUN_KEY, {"at": datetime(2026, 1, 1, tzinfo=UTC)})])
    assert store.get(RUN_KEY) is None and store.records() == {}


def test_store_commit_limit_defaults_to_the_smallest_real_one() -> None:
    assert MemoryStore().max_commit_ops == 100
    assert MemoryStore(max_commit_ops=500).max_commit_ops == 500


def test_store_snapshot_is_not_a_round_trip() -> None:
    store = MemoryStore()
    store.commit([Merge(Key(STATUS, "job"), {"s": 1}, {"n": 2})])
    before = store.round_trips
    assert store.records() == {Key(STATUS, "job"): {"s": 1, "n": 2}}
    assert store.round_trips == before


def test_store_conflict_names_the_failing_op() -> None:
    store = MemoryStore()
    store.commit([Create(RUN_KEY, {})])
    with pytest.raises(CommitConflict) as info:
        store.commit([Merge(Key(RUN, "job", "a"), {}), Create(RUN_KEY, {})])
    assert (info.value.index, info.value.reason) == (1, "exists")
    assert store.get(Key(RUN, "job", "a")) is None


def test_queue_declares_its_capabilities() -> None:
    queue = MemoryQueue(max_deliveries=4)
    assert isinstance(queue, Queue)
    assert queue.capabilities.dedup is True
    assert queue.capabilities.max_deliveries == 4
    assert not isinstance(queue, Store)


def test_queue_delay_and_visibility_follow_a_fake_clock() -> None:
    clock = FakeClock("2026-01-20T02:00Z")
    queue = MemoryQueue(clock=clock)
    queue.publish(b"later", delay=300)
    assert queue.receive(1) == []
    clock.advance(299)
    assert queue.receive(1) == []
    clock.advance(1)
    (first,) = queue.receive(1, visibility=60)
    assert first.body == b"later" and first.attempt == 1
    assert first.enqueued_at == datetime(2026, 1, 20, 2, 0, tzinfo=UTC)
    clock.advance(59)
    assert queue.receive(1) == []
    clock.advance(1)
    (second,) = queue.receive(1, visibility=60)
    assert second.attempt == 2


def test_queue_ignores_a_settle_from_a_receiver_whose_visibility_ran_out() -> None:
    clock = FakeClock("2026-01-20T02:00Z")
    queue = MemoryQueue(clock=clock)
    queue.publish(b"m")
    (stale,) = queue.receive(1, visibility=10)
    clock.advance(10)
    (current,) = queue.receive(1, visibility=10)
    queue.ack(stale)  # another receiver holds it now: ignored
    queue.dead_letter(stale, "Stale")
    assert queue.pending() == 1 and queue.dlq_depth() == 0
    queue.ack(current)
    assert queue.pending() == 0


def test_queue_dedup_window_expires() -> None:
    clock = FakeClock("2026-01-20T02:00Z")
    queue = MemoryQueue(clock=clock, dedup_window=60)
    queue.publish(b"a", dedup_id="k")
    queue.publish(b"a", dedup_id="k")
    assert queue.pending() == 1
    clock.advance(61)
    queue.publish(b"a", dedup_id="k")
    assert queue.pending() == 2


def test_queue_receive_wakes_up_for_a_publish_from_another_thread() -> None:
    import threading

    queue = MemoryQueue()
    publisher = threading.Timer(0.2, lambda: queue.publish(b"hello"))
    publisher.start()
    try:
        got = queue.receive(1, wait=30.0)
    finally:
        publisher.cancel()
    assert [d.body for d in got] == [b"hello"]
