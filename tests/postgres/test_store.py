"""What the conformance suite does not cover: one statement per operation, atomic merges under
contention, schema migration from many hosts at once, expiry, and the mapping of driver failures
to the store's three outcomes. On a real server (see the ``postgres_server`` fixture)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from cronwarden.adapters.postgres import PostgresSettings, PostgresStore
from cronwarden.adapters.postgres.schema import LATEST, migrate
from cronwarden.model.errors import CommitConflict, CommitOutcomeUnknown, StoreUnavailable
from cronwarden.model.ports import ITEM, LOCK, RUN, STATUS, Create, Delete, Key, Merge, Update
from cronwarden.model.records import iso

from .conftest import sql

pytestmark = pytest.mark.postgres
RUN_KEY = Key(RUN, "billing", "2026-01-20T02:00Z")
LOCK_KEY = Key(LOCK, "billing")
STATUS_KEY = Key(STATUS, "billing")
SECRET = "pw-Zq8-s3cret"


def test_every_operation_is_one_statement(make_store: Callable[..., PostgresStore]) -> None:
    store = make_store()
    store.get(RUN_KEY)  # migrates the schema on first use (not counted below)
    before = store.db.statements
    (v_run, v_lock, _) = store.commit(
        [
            Create(RUN_KEY, {"state": "running"}),
            Create(LOCK_KEY, {"owner": "a"}),
            Merge(STATUS_KEY, {"status": "running"}, {"runs": 1}, {"last": 5}),
        ]
    )
    store.commit(
        [
            Update(RUN_KEY, {"state": "succeeded"}, v_run),
            Delete(LOCK_KEY, v_lock),
            Merge(STATUS_KEY, {"status": "succeeded"}, {"runs": 1}, {"last": 7}),
            *[Create(Key(ITEM, "billing", f"w/{i}"), {"i": i}) for i in range(100)],
        ]
    )
    store.query(STATUS)
    store.get(STATUS_KEY)
    assert store.db.statements - before == 4  # two commits, a query, a get: no hidden reads
    status = store.get(STATUS_KEY)
    assert status is not None and status.data == {"status": "succeeded", "runs": 2, "last": 7}


def test_the_pool_hands_out_the_connection_returned_last(
    make_store: Callable[..., PostgresStore],
) -> None:
    """A sequential run path keeps one warm server backend: the pool is LIFO, not in turn."""
    store = make_store(pool_min=3)
    pool = store.db.pool
    pool.wait(timeout=30)
    first, second, third = pool.getconn(), pool.getconn(), pool.getconn()
    for conn in (first, second, third):
        pool.putconn(conn)
    assert pool.getconn() is third
    pool.putconn(third)
    backends = set()
    for n in range(6):
        store.commit([Merge(STATUS_KEY, {"n": n}, {})])
        (backend,) = sql_on(store)
        backends.add(backend)
    assert len(backends) == 1


def sql_on(store: PostgresStore) -> tuple[int]:
    """The backend pid of the connection the store's next statement gets."""
    return store.db.run(
        lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone(), what="pid", writes=False
    )


def test_concurrent_merges_lose_no_increment(make_store: Callable[..., PostgresStore]) -> None:
    hosts = [make_store() for _ in range(4)]
    per_host = 25
    barrier = threading.Barrier(len(hosts))

    def bump(store: PostgresStore, n: int) -> None:
        barrier.wait()
        for i in range(per_host):
            store.commit([Merge(STATUS_KEY, {"last_host": n}, {"count": 1}, {"peak": n * 100 + i})])

    threads = [threading.Thread(target=bump, args=(s, n)) for n, s in enumerate(hosts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    record = hosts[0].get(STATUS_KEY)
    assert record is not None
    assert record.data["count"] == per_host * len(hosts)
    assert record.data["peak"] == (len(hosts) - 1) * 100 + per_host - 1


def test_schema_migrates_once_when_many_hosts_start_at_once(
    settings: PostgresSettings, make_store: Callable[..., PostgresStore]
) -> None:
    import psycopg

    applied: list[list[int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def host() -> None:
        try:
            with psycopg.connect(settings.dsn, autocommit=True) as conn:
                barrier.wait()
                applied.append(migrate(conn, settings.schema))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=host) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(applied) == [[]] * 5 + [list(range(1, LATEST + 1))]
    rows = sql(settings.dsn, f'SELECT version FROM "{settings.schema}".schema_migrations')
    assert rows == [(v,) for v in range(1, LATEST + 1)]
    with psycopg.connect(settings.dsn, autocommit=True) as conn:
        assert migrate(conn, settings.schema) == []  # idempotent
    store = make_store()
    store.commit([Create(RUN_KEY, {"ok": True})])
    assert store.get(RUN_KEY) is not None


def test_expired_records_are_deleted_in_bounded_batches(
    make_store: Callable[..., PostgresStore],
) -> None:
    store = make_store()
    past = iso(datetime.now(UTC) - timedelta(days=1))
    future = iso(datetime.now(UTC) + timedelta(days=30))
    store.commit([Create(Key(ITEM, "j", f"old/{i}"), {"expire_at": past}) for i in range(5)])
    store.commit([Create(Key(ITEM, "j", f"new/{i}"), {"expire_at": future}) for i in range(3)])
    store.commit([Create(Key(ITEM, "j", "forever"), {"x": 1})])
    store.commit([Merge(STATUS_KEY, {"expire_at": past})])
    store.commit([Merge(STATUS_KEY, {"status": "x"})])  # a merge without expire_at keeps it
    assert store.expire(limit=2) == 2
    assert store.expire(limit=100) == 4
    assert store.expire(limit=100) == 0
    left = sorted(r.key.id for r in store.query(ITEM, "j"))
    assert left == ["forever", "new/0", "new/1", "new/2"]
    assert store.get(STATUS_KEY) is None


def test_the_periodic_sweep_runs_by_itself(make_store: Callable[..., PostgresStore]) -> None:
    store = make_store(expire_every=1.0)
    past = iso(datetime.now(UTC) - timedelta(seconds=1))
    store.commit([Create(RUN_KEY, {"expire_at": past})])
    end = time.monotonic() + 30
    while store.get(RUN_KEY) is not None:
        assert time.monotonic() < end, "the sweep never deleted the expired record"
        time.sleep(0.1)


def test_unreachable_server_is_unavailable_and_the_password_never_shows(
    postgres_dsn: str,
) -> None:
    from cronwarden.emulators._process import free_port

    dsn = f"postgresql://cw:{SECRET}@127.0.0.1:{free_port()}/cw"
    store = PostgresStore(
        PostgresSettings(dsn=dsn, schema="nowhere", pool_min=0, pool_timeout=1, connect_timeout=1)
    )
    try:
        with pytest.raises(StoreUnavailable) as info:
            store.commit([Create(RUN_KEY, {})])
        assert not isinstance(info.value, CommitOutcomeUnknown)  # nothing was sent
        assert SECRET not in str(info.value) and "127.0.0.1" in str(info.value)
        with pytest.raises(StoreUnavailable):
            store.get(RUN_KEY)
    finally:
        store.close()


def test_an_unknown_database_is_named_in_the_error(postgres_dsn: str) -> None:
    dsn = postgres_dsn.rsplit("/", 1)[0] + "/no_such_db"
    store = PostgresStore(PostgresSettings(dsn=dsn, schema="x", pool_timeout=1, expire_every=0))
    try:
        with pytest.raises(StoreUnavailable, match='database "no_such_db" does not exist'):
            store.get(RUN_KEY)
    finally:
        store.close()


def _hold_row_lock(dsn: str, schema: str, key: Key, release: threading.Event) -> threading.Thread:
    """Lock ``key``'s row in another session until ``release`` is set."""
    import psycopg

    locked = threading.Event()

    def hold() -> None:
        with psycopg.connect(dsn) as conn, conn.transaction():
            conn.execute(
                f'SELECT 1 FROM "{schema}".records WHERE kind=%s AND job=%s AND id=%s FOR UPDATE',
                (key.kind, key.job, key.id),
            )
            locked.set()
            release.wait(60)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert locked.wait(30)
    return thread


def test_connection_lost_mid_commit_is_outcome_unknown(
    settings: PostgresSettings, make_store: Callable[..., PostgresStore]
) -> None:
    store = make_store()
    store.commit([Merge(STATUS_KEY, {"n": 0})])
    release = threading.Event()
    holder = _hold_row_lock(settings.dsn, settings.schema, STATUS_KEY, release)
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            store.commit([Merge(STATUS_KEY, {"n": 1})])
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    committer = threading.Thread(target=commit)
    committer.start()
    # The commit was sent and waits for the row lock: kill its connection from the server side.
    end = time.monotonic() + 30
    killed = False
    while not killed and time.monotonic() < end:
        rows = sql(
            settings.dsn,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND query LIKE %s",
            ("%commit_ops%",),
        )
        killed = bool(rows)
        time.sleep(0.05)
    committer.join(30)
    release.set()
    holder.join(30)
    assert killed
    assert len(outcome) == 1 and isinstance(outcome[0], CommitOutcomeUnknown), outcome
    record = store.get(STATUS_KEY)  # the pool replaced the dead connection
    assert record is not None and record.data == {"n": 0}


def test_statement_timeout_is_unavailable_not_unknown(
    settings: PostgresSettings, make_store: Callable[..., PostgresStore]
) -> None:
    store = make_store(statement_timeout=1)
    store.commit([Merge(STATUS_KEY, {"n": 0})])
    release = threading.Event()
    holder = _hold_row_lock(settings.dsn, settings.schema, STATUS_KEY, release)
    try:
        with pytest.raises(StoreUnavailable) as info:
            store.commit([Merge(STATUS_KEY, {"n": 1})])
        assert not isinstance(info.value, CommitOutcomeUnknown)  # cancelled = rolled back
    finally:
        release.set()
        holder.join(30)
    record = store.get(STATUS_KEY)
    assert record is not None and record.data == {"n": 0}


def test_conflict_names_the_failing_op_and_applies_nothing(
    make_store: Callable[..., PostgresStore],
) -> None:
    store = make_store()
    (v1,) = store.commit([Create(RUN_KEY, {"fence": 1})])
    store.commit([Update(RUN_KEY, {"fence": 2}, v1)])
    with pytest.raises(CommitConflict) as info:
        store.commit([Merge(STATUS_KEY, {"a": 1}), Update(RUN_KEY, {"fence": 3}, v1)])
    assert (info.value.index, info.value.reason) == (1, "version")
    assert store.get(STATUS_KEY) is None
    with pytest.raises(CommitConflict) as foreign:
        store.commit([Update(RUN_KEY, {"fence": 3}, "etag-from-elsewhere")])
    assert foreign.value.reason == "version"


def test_a_frozen_server_fails_calls_instead_of_hanging_them() -> None:
    """The server's process group stopped (SIGSTOP): a commit in flight is reported as
    outcome-unknown after the client deadline, a new call as unavailable; after SIGCONT the
    same store works again."""
    from cronwarden.emulators.postgres import PostgresServer

    with PostgresServer() as server:
        store = PostgresStore(
            PostgresSettings(
                dsn=server.dsn,
                schema="frozen",
                statement_timeout=1,
                connect_timeout=1,
                pool_timeout=2,
                expire_every=0,
            )
        )
        try:
            store.commit([Merge(STATUS_KEY, {"n": 0})])
            server.freeze()
            try:
                with pytest.raises(CommitOutcomeUnknown):
                    store.commit([Merge(STATUS_KEY, {"n": 1})])
                with pytest.raises(StoreUnavailable):
                    store.get(STATUS_KEY)
            finally:
                server.thaw()
            end = time.monotonic() + 60
            while True:
                try:
                    record = store.get(STATUS_KEY)
                    break
                except StoreUnavailable:
                    assert time.monotonic() < end, "the store did not recover after the thaw"
                    time.sleep(0.2)
            assert record is not None and record.data["n"] in (0, 1)  # unknown: either is fine
        finally:
            store.close()


def _merges(job: str) -> list[Merge]:
    """One fields-only merge per record: a string and a null field (null counts as 0)."""
    return [Merge(Key(STATUS, job, f"m{i}"), {"s": f"v{i}", "z": None}) for i in range(9)]


def test_a_small_commit_is_one_plain_statement_with_the_functions_semantics(
    settings: PostgresSettings, make_store: Callable[..., PostgresStore]
) -> None:
    """Up to MAX_OPS ops go as one plain statement (.commit_sql), more through commit_ops: the
    same records, versions and refusals either way."""
    from cronwarden.adapters.postgres.commit_sql import MAX_OPS

    store = make_store()
    small, large = _merges("small")[:1], _merges("large")
    assert len(small) <= MAX_OPS < len(large)
    for ops in (small, large):
        store.commit(ops)
        # increments from missing (n) and null (z), a maximum taken by a missing field (x)
        store.commit([Merge(o.key, {"s": "w"}, {"n": 2, "z": 3}, {"x": 5}) for o in ops])
        store.commit([Merge(o.key, {}, {"n": 1}, maximums={"x": 4}) for o in ops])  # kept
        store.commit([Merge(o.key, {}, {}, maximums={"x": 9}) for o in ops])  # raised
    for key in (small[0].key, large[0].key):
        record = store.get(key)
        assert record is not None
        assert record.data == {"s": "w", "z": 3, "n": 3, "x": 9}

    # the first refused op (by index) is reported; nothing of the commit applied
    run, gone, taken = (Key(RUN, "small", w) for w in ("w1", "w2", "w3"))
    version, _, _ = store.commit([Create(run, {"a": 1}), Create(gone, {}), Create(taken, {})])
    fresh = Key(RUN, "small", "w4")
    ops = [
        Merge(Key(STATUS, "small"), {"touched": True}),
        Update(run, {"a": 2}, version),
        Create(fresh, {"a": 1}),
        Delete(gone, 12345),  # refused: a version it never had
        Create(taken, {}),  # refused too, but later
    ]
    with pytest.raises(CommitConflict) as refused:
        store.commit(ops)
    assert (refused.value.index, refused.value.reason) == (3, "version")
    assert store.get(fresh) is None and store.get(Key(STATUS, "small")) is None
    got = store.get(run)
    assert got is not None and got.data == {"a": 1} and got.version == version
    with pytest.raises(CommitConflict) as exists:
        store.commit([Create(fresh, {}), Create(taken, {})])
    assert (exists.value.index, exists.value.reason) == (1, "exists")
    versions = store.commit(ops[:3])
    assert versions[0] == versions[1] == versions[2] and versions[0] != version
    (deleted,) = store.commit([Delete(run, versions[1])])
    assert deleted is None and store.get(run) is None
