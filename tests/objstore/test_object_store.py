"""The object store on S3 (moto server), Blob Storage (Azurite) and GCS (fake-gcs-server): the
emulators honour conditional writes, fencing across independent clients, the cache never
decides a commit, round trips per request, lost replies, retention, content limits and exact
text."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from cronwarden.adapters.objectstore import (
    ConditionalObjects,
    ObjectStore,
    PreconditionFailed,
    verify_preconditions,
)
from cronwarden.adapters.objectstore.store import object_name
from cronwarden.model.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    ConfigurationError,
    ContentRefused,
)
from cronwarden.model.ports import ITEM, LOCK, RUN, STATUS, Create, Delete, Key, Merge, Update

from .conftest import ObjectsFactory

JOB = "nightly/report ✓"  # a slash and non-ASCII: the object name quotes it
RUN_KEY = Key(RUN, JOB, "2026-01-20T02:00Z")
LOCK_KEY = Key(LOCK, JOB)
STATUS_KEY = Key(STATUS, JOB)


# -- the emulators honour the preconditions the store relies on --------------------------------
def test_conditional_writes_are_honoured(new_objects: ObjectsFactory) -> None:
    objects = new_objects()
    v1 = objects.put_if_absent("o", b"1")
    with pytest.raises(PreconditionFailed):
        objects.put_if_absent("o", b"2")
    v2 = objects.put_if_version("o", b"2", v1)
    assert v2 != v1
    with pytest.raises(PreconditionFailed):
        objects.put_if_version("o", b"3", v1)
    with pytest.raises(PreconditionFailed):
        objects.put_if_version("missing", b"3", v1)
    if objects.service != "GCS":  # fake-gcs-server ignores ifGenerationMatch on deletes
        with pytest.raises(PreconditionFailed):
            objects.delete_if_version("o", v1)
    blob = objects.get("o")
    assert blob is not None and blob.data == b"2" and blob.version == v2
    assert [name for page in objects.list("") for name, _ in page] == ["o"]
    objects.delete_if_version("o", v2)
    assert objects.get("o") is None


def test_create_if_absent_race_across_clients_has_one_winner(new_objects: ObjectsFactory) -> None:
    clients = [new_objects() for _ in range(8)]
    barrier = threading.Barrier(len(clients))
    winners: list[int] = []

    def race(n: int, objects: ConditionalObjects) -> None:
        barrier.wait()
        try:
            objects.put_if_absent("lock", str(n).encode())
        except PreconditionFailed:
            return
        winners.append(n)

    threads = [threading.Thread(target=race, args=(n, c)) for n, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    blob = clients[0].get("lock")
    assert blob is not None and blob.data == str(winners[0]).encode()


# -- fencing and the cache ---------------------------------------------------------------------
def test_a_stale_owner_is_fenced_out_by_a_takeover(new_objects: ObjectsFactory) -> None:
    owner, rival = ObjectStore(new_objects()), ObjectStore(new_objects())
    (v1, _, _) = owner.commit(
        [Create(RUN_KEY, {"fence": 1}), Create(LOCK_KEY, {"fence": 1}), Merge(STATUS_KEY, {})]
    )
    seen = rival.get(RUN_KEY)
    assert seen is not None and seen.version == v1
    rival.commit([Update(RUN_KEY, {"fence": 2}, seen.version)])
    with pytest.raises(CommitConflict) as info:  # the old owner's fenced write
        owner.commit([Update(RUN_KEY, {"fence": 1, "done": 5}, v1), Merge(STATUS_KEY, {"n": 1})])
    assert info.value.reason == "version" and info.value.index == 0
    record, status = rival.get(RUN_KEY), rival.get(STATUS_KEY)
    assert record is not None and record.data == {"fence": 2}
    assert status is not None and status.data == {}, "nothing of the refused commit applied"


def test_a_stale_cache_never_refuses_a_valid_commit(new_objects: ObjectsFactory) -> None:
    first, second = ObjectStore(new_objects()), ObjectStore(new_objects())
    (lock_version,) = first.commit([Create(LOCK_KEY, {"owner": "a"})])
    second.commit([Delete(LOCK_KEY, lock_version)])  # first's cache still holds the lock
    first.commit([Create(LOCK_KEY, {"owner": "c"})])
    record = second.get(LOCK_KEY)
    assert record is not None and record.data == {"owner": "c"}


def test_round_trips_are_what_was_sent(new_objects: ObjectsFactory) -> None:
    warm = ObjectStore(new_objects())
    before = warm.round_trips
    warm.commit([Create(RUN_KEY, {}), Merge(STATUS_KEY, {"a": 1})])  # a fresh job: one put
    warm.commit([Merge(STATUS_KEY, {"a": 2})])  # the cached version: one put
    assert warm.round_trips - before == 2
    warm.commit([Create(Key(STATUS, "other"), {})])
    before = warm.round_trips
    assert len(warm.query(STATUS)) == 2  # the listing; both objects are the cached versions
    assert warm.round_trips - before == 1

    cold = ObjectStore(new_objects())  # another process: it has never seen the job object
    before = cold.round_trips
    cold.commit([Merge(STATUS_KEY, {"a": 3})])  # refused put, read, put
    assert cold.round_trips - before == 3

    before = warm.round_trips
    statuses = warm.query(STATUS)  # the listing, and the one job object that changed
    assert warm.round_trips - before == 2
    assert [r.data for r in statuses if r.key.job == JOB] == [{"a": 3}]


# -- lost replies, retention, content ----------------------------------------------------------
class _LandsThenLosesTheReply(ConditionalObjects):
    """A real client whose next write lands and then reports a lost answer."""

    def __init__(self, real: ConditionalObjects) -> None:
        self.real, self.lose = real, False

    def get(self, name: str):  # type: ignore[no-untyped-def]
        return self.real.get(name)

    def _lost(self, version: str) -> str:
        if self.lose:
            self.lose = False
            raise CommitOutcomeUnknown("reply lost after the write landed")
        return version

    def put_if_absent(self, name: str, data: bytes) -> str:
        return self._lost(self.real.put_if_absent(name, data))

    def put_if_version(self, name: str, data: bytes, version: str) -> str:
        return self._lost(self.real.put_if_version(name, data, version))

    def delete_if_version(self, name: str, version: str) -> None:
        self.real.delete_if_version(name, version)

    def list(self, prefix: str):  # type: ignore[no-untyped-def]
        return self.real.list(prefix)


def test_a_lost_reply_is_outcome_unknown_and_the_next_commit_reads_again(
    new_objects: ObjectsFactory,
) -> None:
    objects = _LandsThenLosesTheReply(new_objects())
    store = ObjectStore(objects)
    (v1,) = store.commit([Create(RUN_KEY, {"fence": 1})])
    objects.lose = True
    with pytest.raises(CommitOutcomeUnknown):
        store.commit([Update(RUN_KEY, {"fence": 1, "items": 3}, v1)])
    landed = store.get(RUN_KEY)  # read back: it landed, under a new version
    assert landed is not None and landed.data == {"fence": 1, "items": 3} and landed.version != v1
    with pytest.raises(CommitConflict):
        store.commit([Update(RUN_KEY, {"fence": 1}, v1)])
    store.commit([Update(RUN_KEY, {"fence": 1, "items": 4}, landed.version)])


def test_expired_records_are_dropped_on_the_next_write(new_objects: ObjectsFactory) -> None:
    now = [datetime(2026, 3, 1, tzinfo=UTC)]
    store = ObjectStore(new_objects(), clock=lambda: now[0])
    old, kept = Key(RUN, JOB, "2026-01-01T00:00Z"), Key(RUN, JOB, "2026-02-28T00:00Z")
    store.commit([Create(old, {"expire_at": "2026-02-01T00:00:00+00:00"})])
    store.commit([Create(kept, {"expire_at": "2026-03-31T00:00:00Z"})])
    assert store.get(old) is not None, "kept for a day after its write, whatever its expire_at"
    now[0] += timedelta(days=2)
    store.commit([Merge(STATUS_KEY, {"ok": True})])
    assert store.get(old) is None
    assert store.get(kept) is not None


def test_text_is_held_exactly(new_objects: ObjectsFactory) -> None:
    store = ObjectStore(new_objects())
    data = {"error": 'nul \x00, emoji 🦉, quote " and \\', "ü": ["✓", None, 1.5]}
    store.commit([Create(RUN_KEY, data)])
    record = ObjectStore(new_objects()).get(RUN_KEY)
    assert record is not None and record.data == data


def test_a_lone_surrogate_is_refused_as_on_every_store(new_objects: ObjectsFactory) -> None:
    """JSON could carry it as an escape, but no other store can hold it (it has no UTF-8): the
    object stores refuse it too, so a job's state stays movable between stores."""
    store = ObjectStore(new_objects())
    before = store.round_trips
    with pytest.raises(ContentRefused, match="lone surrogate"):
        store.commit([Create(RUN_KEY, {"error": "lone \ud800"})])
    with pytest.raises(ContentRefused, match="lone surrogate"):
        store.commit([Merge(STATUS_KEY, {"note": ["\udcff"]})])
    assert store.round_trips - before == 2  # the port counts each commit; nothing was sent
    assert store.get(RUN_KEY) is None and store.get(STATUS_KEY) is None


def test_an_object_past_its_limit_is_refused_before_sending(new_objects: ObjectsFactory) -> None:
    store = ObjectStore(new_objects(), max_object_bytes=4_000)
    store.commit([Create(LOCK_KEY, {"owner": "a"})])
    before = store.round_trips
    with pytest.raises(ContentRefused, match="past the limit"):
        store.commit([Create(RUN_KEY, {"blob": "x" * 5_000})])
    assert store.round_trips - before == 1  # the port counts the commit; nothing was sent
    assert store.get(RUN_KEY) is None


def test_objects_are_named_per_job_under_the_prefix(new_objects: ObjectsFactory) -> None:
    objects = new_objects()
    store = ObjectStore(objects, "team-a")
    store.commit([Merge(STATUS_KEY, {"ok": True})])
    names = [name for page in objects.list("") for name, _ in page]
    assert names == [object_name("team-a/", JOB)]
    assert names[0].startswith("team-a/jobs/nightly%2Freport%20%E2%9C%93")
    assert [r.key.job for r in store.query(STATUS)] == [JOB]


# -- an endpoint that ignores the preconditions is refused up front -----------------------------
class _IgnoresConditions(_LandsThenLosesTheReply):
    """A real client whose conditional writes are sent as plain overwrites (what an
    S3-compatible server without conditional writes does)."""

    def put_if_absent(self, name: str, data: bytes) -> str:
        found = self.real.get(name)
        if found is None:
            return self.real.put_if_absent(name, data)
        return self.real.put_if_version(name, data, found.version)

    def put_if_version(self, name: str, data: bytes, version: str) -> str:
        return self.put_if_absent(name, data)


def test_preconditions_are_verified(new_objects: ObjectsFactory) -> None:
    objects = new_objects()
    verify_preconditions(objects, "team-a/")
    assert [n for page in objects.list("") for n, _ in page] == [], "the probe is deleted"
    with pytest.raises(ConfigurationError, match="does not honour conditional writes"):
        verify_preconditions(_IgnoresConditions(objects))


def test_a_run_of_a_past_window_keeps_its_whole_ledger(new_objects: ObjectsFactory) -> None:
    """A fake clock at an old window writes every ``expire_at`` in the past (for the store's
    real clock): no ledger page may be dropped by the run's own later writes."""
    import cronwarden
    from cronwarden.testing import run_once

    @cronwarden.job("ledgered", cron="0 2 * * *", max_runtime="1m")
    def ledgered(ctx: cronwarden.RunContext) -> None:
        for _ in ctx.items(range(250)):
            pass

    store = ObjectStore(new_objects())
    assert run_once(ledgered, "2026-01-20T02:00Z", store=store).kind.value == "succeeded"
    pages = store.query(ITEM, "ledgered")
    assert len(pages) >= 3, [p.key.id for p in pages]  # 250 items, 100 per batch
    again = run_once(ledgered, "2026-01-20T02:00Z", store=store)
    assert again.kind.value == "duplicate"
