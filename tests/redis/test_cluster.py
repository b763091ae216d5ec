"""The Redis store and queue unchanged on a Redis Cluster of three masters: every key of a job
in one slot (the ``{job}`` hash tag), so a claim is one script on one node; jobs spread over
the nodes; a query without a job asks each job's node."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from cronwarden.adapters.redis import RedisQueue, RedisSettings, RedisStore
from cronwarden.emulators.redis import RedisCluster
from cronwarden.model.errors import CommitConflict
from cronwarden.model.ports import ITEM, RUN, STATUS, Create, Key, Merge

pytestmark = [pytest.mark.redis, pytest.mark.slow]
JOBS = [f"job-{n}" for n in range(12)]


@pytest.fixture
def settings(redis_cluster: RedisCluster, redis_prefix: str) -> RedisSettings:
    return RedisSettings(url=redis_cluster.url, cluster=True, prefix=redis_prefix)


@pytest.fixture
def store(settings: RedisSettings) -> Iterator[RedisStore]:
    made = RedisStore(settings)
    try:
        yield made
    finally:
        made.close()


def test_jobs_spread_over_the_nodes_and_each_job_stays_in_one_slot(
    store: RedisStore, redis_cluster: RedisCluster
) -> None:
    from redis.crc import key_slot

    client = store.link.client()
    nodes = set()
    for job in JOBS:
        keys = [store.record_key(Key(kind, job, "w")) for kind in (RUN, ITEM, STATUS)]
        assert len({key_slot(k.encode()) for k in keys}) == 1
        nodes.add(client.get_node_from_key(keys[0]).name)
    assert len(nodes) == 3  # the test really spans the cluster


def test_claim_race_has_one_winner_per_job_on_a_cluster(settings: RedisSettings) -> None:
    stores = [RedisStore(settings) for _ in range(8)]
    winners: dict[str, list[int]] = {job: [] for job in JOBS}
    barrier = threading.Barrier(len(stores))

    def racer(n: int) -> None:
        barrier.wait()
        for job in JOBS:
            try:
                stores[n].commit(
                    [Create(Key(RUN, job, "w"), {"owner": n}), Merge(Key(STATUS, job), {"n": n})]
                )
            except CommitConflict:
                continue
            winners[job].append(n)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(len(stores))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(len(won) == 1 for won in winners.values()), winners
        for job in JOBS:
            record = stores[0].get(Key(RUN, job, "w"))
            assert record is not None and record.data == {"owner": winners[job][0]}
        statuses = stores[0].query(STATUS)
        assert [r.key.job for r in statuses] == sorted(JOBS)
        items = stores[0].query(RUN, JOBS[3], prefix="w")
        assert [r.key.id for r in items] == ["w"]
    finally:
        for s in stores:
            s.close()


def test_the_queue_works_on_a_cluster(settings: RedisSettings) -> None:
    queue = RedisQueue(settings)
    try:
        queue.publish(b"one", attributes={"job": "a"}, dedup_id="d1")
        queue.publish(b"one", attributes={"job": "a"}, dedup_id="d1")
        got = queue.receive(10, visibility=30, wait=5)
        assert [d.body for d in got] == [b"one"]
        queue.dead_letter(got[0], "Bad", "why")
        assert queue.dlq_depth() == 1
        assert queue.redrive(5) == 1
        (again,) = queue.receive(1, visibility=30, wait=5)
        queue.ack(again)
        assert queue.depth() == 0
    finally:
        queue.close()
