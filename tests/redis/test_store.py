"""The Redis store beyond the conformance suite: one round trip per operation, the run protocol's
budget, retention by TTL, and each failure mapped to the port's outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import cronwarden
from cronwarden import Engine, JobSet, OutcomeKind, RunContext, RunRequest, Trigger, Worker
from cronwarden.adapters.redis import RedisQueue, RedisSettings, RedisStore
from cronwarden.emulators._process import free_port
from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    ContentRefused,
    StoreUnavailable,
)
from cronwarden.model.ports import ITEM, RUN, STATUS, Create, Key, Merge, Update
from tests.support.harness import at

pytestmark = pytest.mark.redis
W = at("2026-01-20T02:00Z")
STATUS_KEY = Key(STATUS, "billing")
SECRET = "s3cr3t-redis-pw"


def _jobs(calls: list[str]) -> JobSet:
    def ok(ctx: RunContext) -> None:
        calls.append(ctx.run_key)

    def fan(ctx: RunContext) -> None:
        for item in ctx.items(range(250), batch_size=100):
            calls.append(f"{ctx.run_key}/{item.key}")

    return JobSet(
        [
            cronwarden.job("ok", cron="0 * * * *", max_runtime="5m")(ok),
            cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(fan),
        ]
    )


def test_happy_path_is_two_round_trips(
    make_store: Callable[..., RedisStore], make_queue: Callable[..., RedisQueue]
) -> None:
    calls: list[str] = []
    jobs = _jobs(calls)
    store, queue = make_store(), make_queue()
    trigger, worker = Trigger(jobs, queue, store), Worker(Engine(jobs, store), queue)
    before = store.round_trips
    trigger.tick("ok", W)
    assert worker.poll(wait=10) == 1
    assert calls == ["ok:2026-01-20T02:00Z"]
    assert store.round_trips - before == 2  # claim, complete: one script each
    run = store.get(Key(RUN, "ok", "2026-01-20T02:00Z"))
    assert run is not None and run.data["state"] == "succeeded"
    assert queue.depth() == 0 and queue.dlq_depth() == 0


def test_ledger_run_is_one_round_trip_per_batch(make_store: Callable[..., RedisStore]) -> None:
    calls: list[str] = []
    store = make_store()
    before = store.round_trips
    assert Engine(_jobs(calls), store).execute(RunRequest("fan", W)).kind is OutcomeKind.SUCCEEDED
    assert len(calls) == 250
    assert store.round_trips - before == 2 + 3


def test_hosts_racing_on_one_window_run_it_once(make_store: Callable[..., RedisStore]) -> None:
    calls: list[str] = []
    jobs = _jobs(calls)
    engines = [Engine(jobs, make_store()) for _ in range(4)]
    barrier = threading.Barrier(len(engines))

    def run(engine: Engine) -> None:
        barrier.wait()
        engine.execute(RunRequest("ok", W))

    threads = [threading.Thread(target=run, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["ok:2026-01-20T02:00Z"]


def test_concurrent_merges_lose_no_increment(make_store: Callable[..., RedisStore]) -> None:
    stores = [make_store() for _ in range(4)]

    def bump(store: RedisStore) -> None:
        for _ in range(25):
            store.commit([Merge(STATUS_KEY, {"who": "x"}, increments={"n": 1})])

    threads = [threading.Thread(target=bump, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    record = stores[0].get(STATUS_KEY)
    assert record is not None and record.data["n"] == 100


def test_large_integers_and_floats_are_kept_exactly(make_store: Callable[..., RedisStore]) -> None:
    store = make_store()
    big = 2**63 - 5
    store.commit([Merge(STATUS_KEY, {"f": 0.1 + 0.2}, maximums={"m": big}, increments={"i": big})])
    store.commit([Merge(STATUS_KEY, {}, maximums={"m": big - 1}, increments={"i": 2})])
    store.commit([Merge(STATUS_KEY, {}, maximums={"m": -(2**62)})])
    record = store.get(STATUS_KEY)
    assert record is not None
    assert record.data == {"f": 0.1 + 0.2, "m": big, "i": big + 2}
    with pytest.raises(ContentRefused, match="64-bit"):
        store.commit([Merge(STATUS_KEY, {}, increments={"i": 2**64})])


def test_expired_records_are_gone_and_leave_the_index(
    make_store: Callable[..., RedisStore], admin: Any, settings: RedisSettings
) -> None:
    store = make_store(min_retention=1)
    soon = (datetime.now(UTC) + timedelta(milliseconds=300)).isoformat()
    later = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    store.commit(
        [
            Create(Key(ITEM, "billing", "w/1"), {"expire_at": soon}),
            Create(Key(ITEM, "billing", "w/2"), {"expire_at": later}),
            Create(Key(ITEM, "billing", "w/3"), {}),
        ]
    )
    ttl = admin.pttl(store.record_key(Key(ITEM, "billing", "w/2")))
    assert 29 * 86400_000 < ttl <= 30 * 86400_000
    assert admin.pttl(store.record_key(Key(ITEM, "billing", "w/3"))) == -1  # kept
    end = time.monotonic() + 10
    while store.get(Key(ITEM, "billing", "w/1")) is not None:
        assert time.monotonic() < end, "the record did not expire"
        time.sleep(0.05)
    assert [r.key.id for r in store.query(ITEM, "billing")] == ["w/2", "w/3"]
    # a later commit of the job sweeps the expired id out of the index
    store.commit([Create(Key(ITEM, "billing", "w/4"), {})])
    index = admin.zrange(f"{settings.prefix}:{{billing}}:x:{ITEM}", 0, -1)
    assert index == [b"w/2", b"w/3", b"w/4"]


def test_jobs_with_braces_in_their_names_keep_one_slot(
    make_store: Callable[..., RedisStore],
) -> None:
    from redis.crc import key_slot

    store = make_store()
    for job in ("a}b", "{x}", "}"):
        store.commit([Create(Key(RUN, job, "w"), {"job": job}), Merge(Key(STATUS, job), {"j": 1})])
        slots = {
            key_slot(store.record_key(Key(kind, job, i)).encode())
            for kind, i in ((RUN, "w"), (STATUS, ""))
        }
        assert len(slots) == 1
    assert [r.key.job for r in store.query(STATUS)] == sorted(["a}b", "{x}", "}"])


def test_a_lone_surrogate_is_refused_before_sending(make_store: Callable[..., RedisStore]) -> None:
    store = make_store()
    with pytest.raises(ContentRefused):
        store.commit([Create(Key(RUN, "billing", "w\ud800"), {})])
    with pytest.raises(ContentRefused):
        store.commit([Create(Key(RUN, "billing", "w"), {"text": "a\udc00"})])
    assert store.query(RUN, "billing") == []
    store.commit([Create(Key(RUN, "billing", "nul"), {"text": "a\x00b"})])  # NUL is held
    record = store.get(Key(RUN, "billing", "nul"))
    assert record is not None and record.data == {"text": "a\x00b"}


def test_a_counter_that_is_not_an_integer_is_refused_whole(
    make_store: Callable[..., RedisStore],
) -> None:
    store = make_store()
    store.commit([Merge(STATUS_KEY, {"n": "text"})])
    with pytest.raises(ContentRefused, match="'n'"):
        store.commit(
            [
                Create(Key(RUN, "billing", "w"), {}),
                Merge(STATUS_KEY, {"a": 2}, increments={"n": 1}),
            ]
        )
    assert store.get(Key(RUN, "billing", "w")) is None
    record = store.get(STATUS_KEY)
    assert record is not None and record.data == {"n": "text"}


def test_conflict_names_the_failing_op_and_applies_nothing(
    make_store: Callable[..., RedisStore],
) -> None:
    store = make_store()
    (version,) = store.commit([Create(Key(RUN, "billing", "w"), {"a": 1})])
    with pytest.raises(CommitConflict) as info:
        store.commit(
            [
                Merge(STATUS_KEY, {"touched": True}),
                Update(Key(RUN, "billing", "w"), {"a": 2}, "1-deadbeef"),
            ]
        )
    assert info.value.index == 1 and info.value.reason == "version"
    assert store.get(STATUS_KEY) is None
    record = store.get(Key(RUN, "billing", "w"))
    assert record is not None and record.version == version


def test_unreachable_server_is_unavailable_and_the_password_never_shows() -> None:
    port = free_port()
    store = RedisStore(RedisSettings(url=f"redis://:{SECRET}@127.0.0.1:{port}/0", timeout=2))
    try:
        with pytest.raises(StoreUnavailable) as info:
            store.commit([Create(STATUS_KEY, {})])
        assert not isinstance(info.value, CommitOutcomeUnknown)
        assert SECRET not in str(info.value) and str(port) in str(info.value)
        with pytest.raises(StoreUnavailable):
            store.get(STATUS_KEY)
    finally:
        store.close()


def test_a_reply_lost_after_sending_is_outcome_unknown(
    make_store: Callable[..., RedisStore], admin: Any
) -> None:
    store = make_store(timeout=0.5)
    store.get(STATUS_KEY)  # connected
    admin.execute_command("CLIENT", "PAUSE", "1500", "WRITE")
    with pytest.raises(CommitOutcomeUnknown):
        store.commit([Create(Key(RUN, "billing", "w"), {"a": 1})])
    # never resent: the store is usable again after the pause, and a read decides
    end = time.monotonic() + 10
    while True:
        try:
            store.get(Key(RUN, "billing", "w"))
            break
        except StoreUnavailable:
            assert time.monotonic() < end, "the store did not recover after the pause"
            time.sleep(0.05)


def test_a_server_refusing_before_running_is_unavailable(
    make_store: Callable[..., RedisStore], admin: Any
) -> None:
    store = make_store()
    store.get(STATUS_KEY)
    admin.config_set("maxmemory", "1")
    try:
        with pytest.raises(StoreUnavailable) as info:
            store.commit([Create(Key(RUN, "billing", "w"), {"a": 1})])
        assert not isinstance(info.value, CommitOutcomeUnknown)
        assert "OOM" in str(info.value) or "memory" in str(info.value)
    finally:
        admin.config_set("maxmemory", "0")
    assert store.get(Key(RUN, "billing", "w")) is None


def test_a_flushed_script_cache_is_reloaded_and_counted(
    make_store: Callable[..., RedisStore], admin: Any
) -> None:
    store = make_store()
    store.commit([Create(Key(RUN, "billing", "a"), {})])
    admin.script_flush()  # what a restarted or failed-over server looks like
    before = store.round_trips
    store.commit([Create(Key(RUN, "billing", "b"), {})])
    assert store.round_trips - before == 2  # NOSCRIPT, then the script itself
    assert [r.key.id for r in store.query(RUN, "billing")] == ["a", "b"]


def test_wait_without_the_replicas_asked_for_is_outcome_unknown(
    make_store: Callable[..., RedisStore],
) -> None:
    store = make_store(wait_replicas=1, wait_timeout=0.2)  # the test server has no replica
    with pytest.raises(CommitOutcomeUnknown, match="0 of 1 replica"):
        store.commit([Create(Key(RUN, "billing", "w"), {"a": 1})])
    record = store.get(Key(RUN, "billing", "w"))  # applied on the primary: read back
    assert record is not None and record.data == {"a": 1}
    with pytest.raises(CommitConflict):  # a conflict is still a conflict, WAIT or not
        store.commit([Create(Key(RUN, "billing", "w"), {"a": 2})])


def test_query_returns_field_names_exactly(make_store: Callable[..., RedisStore]) -> None:
    store = make_store()
    data = {'"q"': 1, "a/b": [1, {"x": None}], "ü ✓": "é", "\n\t\x01": 0.5, "\\": True, "": {}}
    store.commit([Create(Key(RUN, "billing", "w"), data), Merge(STATUS_KEY, data)])
    (run,) = store.query(RUN, "billing")
    (status,) = store.query(STATUS)
    got = store.get(Key(RUN, "billing", "w"))
    assert run.data == status.data == data
    assert got is not None and got.version == run.version


def test_a_record_whose_expire_at_has_passed_is_still_kept_a_while(
    make_store: Callable[..., RedisStore], admin: Any
) -> None:
    """A writer whose clock puts ``expire_at`` in the past must not lose its claim at once."""
    store = make_store(min_retention=3600)
    past = (datetime.now(UTC) - timedelta(days=300)).isoformat()
    store.commit([Create(Key(RUN, "billing", "w"), {"expire_at": past, "state": "running"})])
    ttl = admin.pttl(store.record_key(Key(RUN, "billing", "w")))
    assert 3500_000 < ttl <= 3600_000
    assert store.get(Key(RUN, "billing", "w")) is not None


def test_prefix_and_range_follow_code_point_order(make_store: Callable[..., RedisStore]) -> None:
    store = make_store()
    ids = ["a", "a/", "a/z", "a/ü", "a/\U0010ffff", "a0", "b", "é"]
    store.commit([Create(Key(ITEM, "billing", i), {"i": i}) for i in ids])
    assert [r.key.id for r in store.query(ITEM, "billing")] == sorted(ids)
    got = [r.key.id for r in store.query(ITEM, "billing", prefix="a/")]
    assert got == sorted(i for i in ids if i.startswith("a/"))
    got = [r.key.id for r in store.query(ITEM, "billing", start="a/z", end="é")]
    assert got == sorted(i for i in ids if "a/z" <= i < "é")
    assert store.query(ITEM, "billing", prefix="a/", start="b") == []
    assert [r.key.id for r in store.query(ITEM, "billing", prefix="a/", limit=2)] == ["a/", "a/z"]
