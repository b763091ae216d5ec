"""Liveness evaluation for 10, 1,000 and 10,000 jobs on each store: ``Watcher.check()`` reads
the status records that are due (``Store.query_due``: its round trips are counted, and the
records it read: ``Watcher.last_read``) and writes nothing when no alert changes (steady state).
The watcher's first check reads every record (the warm-up); the measured checks are the steady
state of a healthy fleet. At the largest size, 100 jobs are then made late (their window's
deadline passed with no run: ``missed``) and the checks after the one that announces them are
measured: they read the late jobs' records, not the fleet's.

Status records are seeded healthy with the store's own SDK in bulk (Firestore: batches of 500;
Table Storage: one partition per job, so one request per record, sent from a thread pool;
DynamoDB: BatchWriteItem, 25 items per request, of the items the store's commits write).
The watcher's clock is the seeding instant, so no window falls due during the measurement (a
job whose window came due and has not run yet costs a read of its run records: real, but a
different measurement, made by the windows section).

The floor: the same records read with the store's SDK alone, no cronwarden code (SQLite and
PostgreSQL: the driver's ``fetchall`` of the data column; Firestore: ``stream()`` of the
collection; Table Storage: ``query_entities`` over the status rows; DynamoDB: the paginated
GSI query). What the watcher adds over it is its own cost; the floor is the emulator's and the
SDK's, which a watcher cannot go below. The key-only floor reads the same records projected to
their key (Firestore ``select``, Table Storage ``select``, DynamoDB ``ProjectionExpression``,
SQL one column): what the request costs however few fields a projection asks for."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwarden import Job, JobSet, Watcher, job
from cronwarden.model.ports import STATUS, Key, Merge, Store
from cronwarden.model.records import due_ts, iso

from .emulators import Emulators
from .probe import Probe
from .stats import summary

SIZES = (10, 1_000, 10_000)
REPEATS = 5
SCHEDULES = 60  #: hourly jobs spread over the hour: 60 distinct schedules


def _name(i: int) -> str:
    return f"job-{i:05d}"


def _job(i: int) -> Job:
    return job(_name(i), cron=f"{i % SCHEDULES} * * * *", max_runtime="10m")(lambda ctx: None)


def _status(name: str, now: datetime) -> dict[str, Any]:
    window = _job(int(name.split("-")[1])).schedule.floor(now)
    return {
        "job_name": name,
        "run_id": "20260101T000000000-abcdef",
        "run_key": f"{name}:{window.strftime('%Y-%m-%dT%H:%MZ')}",
        "status": "succeeded",
        "started_at": iso(now - timedelta(minutes=1)),
        "finished_at": iso(now),
        "duration_ms": 1234,
        "error_snippet": None,
        "last_success_at": iso(now),
        "last_success_window_ts": int(window.timestamp()),
        "consecutive_failures": 0,
        "skips_since_success": 0,
        "first_seen_at": iso(now - timedelta(days=1)),
        "alerts": [],
        # [windows] what the run commits and the watcher's checkpoint leave on a healthy job
        "windows_recorded": 1,
        "windows_open": 0,
        "accounted_through_ts": int(window.timestamp()),
        "accounted_base": 1,
        # [scale] what the watcher's last look left: the next window's deadline (+ 1 h grace)
        "watch_due": due_ts(_job(int(name.split("-")[1])).schedule.next_after(now) + HOUR),
    }


LATE = 100  #: jobs made late among the largest fleet
HOUR = timedelta(hours=1)


def _late(name: str, now: datetime) -> dict[str, Any]:
    """A job whose 3-hours-ago window was its last run: the next ones' deadlines passed."""
    window = _job(int(name.split("-")[1])).schedule.floor(now - 3 * HOUR)
    return {
        **_status(name, now),
        "last_success_window_ts": int(window.timestamp()),
        "accounted_through_ts": int(window.timestamp()),
        "watch_due": due_ts(window + 2 * HOUR),
    }


def _seed(name: str, store: Store, first: int, last: int, now: datetime) -> None:
    jobs = [_name(i) for i in range(first, last)]
    if name in ("sqlite", "postgres", "redis", "s3", "blob", "gcs"):
        for j in jobs:
            store.commit([Merge(Key(STATUS, j), _status(j, now))])
    elif name == "dynamodb":
        _seed_dynamodb(store, jobs, now)
    elif name == "firestore":
        from cronwarden.adapters.gcp._codec import encode

        fs: Any = store
        for start in range(0, len(jobs), 500):
            batch = fs.client.batch()
            for j in jobs[start : start + 500]:
                key, data = Key(STATUS, j), _status(j, now)
                batch.set(fs._ref(key), {**fs._meta(key, data), "d": encode(data)})
            batch.commit()
    else:
        from cronwarden.adapters.azure import _entity, _keys

        table: Any = store._table  # type: ignore[attr-defined]

        def put(j: str) -> None:
            entity = _entity.build_entity(
                _keys.partition_key(j), _keys.row_key(STATUS, ""), _status(j, now)
            )
            table.upsert_entity(entity)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, jobs))


def _seed_dynamodb(store: Any, jobs: list[str], now: datetime) -> None:
    """BatchWriteItem, 25 puts per request, of the items a Create of each status record writes
    (the store's own item layout and a fresh version each), from a thread pool; unprocessed
    items are resent until none remain."""
    from cronwarden.adapters.aws import store as dynamo

    def write(chunk: list[str]) -> None:
        requests = [
            {"PutRequest": {"Item": dynamo._full_item(Key(STATUS, j), _status(j, now), v)}}
            for j in chunk
            for v in [dynamo._new_version()]
        ]
        for attempt in range(100):
            response = store._db.batch_write_item(RequestItems={store.table: requests})
            requests = response.get("UnprocessedItems", {}).get(store.table, [])
            if not requests:
                return
            time.sleep(min(1.0, 0.01 * 2**attempt))  # the service's own backoff advice
        raise RuntimeError(f"dynamodb seeding: {len(requests)} items stayed unprocessed")

    chunks = [jobs[start : start + 25] for start in range(0, len(jobs), 25)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, chunks))


def _floor(name: str, store: Any, keys_only: bool = False) -> Any:
    """A callable that reads every status record with the store's SDK alone (see above);
    ``keys_only``: projected to the record's key."""
    column = "job" if keys_only else "data"
    if name == "sqlite":
        sql = f"SELECT {column} FROM records WHERE kind = ?"
        return lambda: store._db.connection().execute(sql, [STATUS]).fetchall()
    if name == "postgres":
        sql = f"SELECT {column} FROM {store._q}.records WHERE kind = %s"
        return lambda: store.db.run(
            lambda conn: store.db.execute(conn, sql, [STATUS]).fetchall(),
            what="floor",
            writes=False,
        )
    if name == "firestore":
        collection: Any = store.client.collection(store.collection_name(STATUS))
        if keys_only:
            collection = collection.select(["job"])
        return lambda: list(collection.stream())
    if name == "table":
        from cronwarden.adapters.azure import _keys

        low = _keys.kind_prefix(STATUS)
        params = {"low": low, "high": _keys.successor(low)}
        return lambda: list(
            store._table.query_entities(
                "RowKey ge @low and RowKey lt @high",
                parameters=params,
                results_per_page=1000,
                select=["PartitionKey"] if keys_only else None,
            )
        )
    if name == "dynamodb":
        from cronwarden.adapters.aws.store import INDEX

        projection = {"ProjectionExpression": "pk"} if keys_only else {}

        def scan() -> list[Any]:
            pages = store._db.get_paginator("query").paginate(
                TableName=store.table,
                IndexName=INDEX,
                KeyConditionExpression="k = :k",
                ExpressionAttributeValues={":k": {"S": STATUS}},
                **projection,
            )
            return [item for page in pages for item in page["Items"]]

        return scan
    if name == "redis":
        return _redis_floor(store, keys_only)
    if name in ("s3", "blob", "gcs"):
        objects = store.objects
        folder = store.prefix + "jobs/"

        def read_all() -> list[Any]:
            names = [n for page in objects.list(folder) for n, _ in page]
            if keys_only:
                return names
            with ThreadPoolExecutor(8) as pool:
                return list(pool.map(objects.get, names))

        return read_all
    raise ValueError(name)


def _redis_floor(store: Any, keys_only: bool) -> Any:
    """redis-py alone: the jobs hash, then (not keys only) one pipeline of ``HGETALL`` of every
    job's status record: two round trips."""
    from cronwarden.adapters.redis.store import tag

    client = store.link.client()
    jobs_key = f"{store.prefix}:jobs"

    def read() -> list[Any]:
        jobs = [j.decode() for j in client.hkeys(jobs_key)]
        if keys_only:
            return jobs
        pipe = client.pipeline(transaction=False)
        for j in jobs:
            pipe.hgetall(f"{store.prefix}:{{{tag(j)}}}:r:{STATUS}:")
        return list(pipe.execute())

    return read


def measure(
    emulators: Emulators, stores: list[str], sizes: tuple[int, ...] = SIZES, repeats: int = REPEATS
) -> dict[str, Any]:
    all_jobs = [_job(i) for i in range(max(sizes))]
    results: dict[str, Any] = {}
    for name in stores:
        try:
            rows = _measure_store(emulators, name, sizes, repeats, all_jobs)
        except Exception as exc:  # one store's failure must not hide the others' figures
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        results[name] = rows
    return results


def _measure_store(
    emulators: Emulators, name: str, sizes: tuple[int, ...], repeats: int, all_jobs: list[Job]
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with emulators.store(name) as store:
        probe = Probe(store)
        seeded = 0
        now = datetime.now(UTC)
        for size in sizes:
            began = time.perf_counter()
            _seed(name, store, seeded, size, now)
            seed_s = time.perf_counter() - began
            seeded = size
            watcher = Watcher(
                JobSet(all_jobs[:size]), store, notifiers=[], clock=lambda now=now: now
            )
            watcher.check()  # warm-up (clients); steady state from here
            floor, keys = _floor(name, store), _floor(name, store, keys_only=True)
            checks, queries, trips, floors, key_floors, read = [], [], [], [], [], []
            calls: dict[str, Any] = {}
            for _ in range(repeats):
                probe.reset()
                start = store.round_trips  # the due query is not one of the probe's calls
                began = time.perf_counter()
                report = watcher.check()
                checks.append(time.perf_counter() - began)
                trips.append(store.round_trips - start)
                read.append(watcher.last_read)
                calls = probe.breakdown()
                if not report.ok or len(report.jobs) + report.unread != size:
                    raise RuntimeError(f"{name}/{size}: unexpected alerts {report.active[:3]}")
                began = time.perf_counter()
                store.query(STATUS)
                queries.append(time.perf_counter() - began)
                began = time.perf_counter()
                if len(floor()) < size:  # (plus the watcher's own record, if written)
                    raise RuntimeError(f"{name}/{size}: the bare SDK query missed records")
                floors.append(time.perf_counter() - began)
                began = time.perf_counter()
                keys()
                key_floors.append(time.perf_counter() - began)
            check_s = summary(checks)
            rows.append(
                {
                    "jobs": size,
                    "round_trips": trips,
                    "calls": calls,
                    "check_s": check_s,
                    "query_s": summary(queries),
                    "floor_s": summary(floors),
                    "key_floor_s": summary(key_floors),
                    "per_job_us": check_s["median"] / size * 1e6,
                    "seed_s": seed_s,
                    "records_read": read,
                }
            )
        if sizes and size == max(sizes) and size >= 10 * LATE:
            rows[-1]["late"] = _measure_late(store, watcher, probe, now, size, repeats)
    return rows


def _measure_late(
    store: Store, watcher: Watcher, probe: Probe, now: datetime, size: int, repeats: int
) -> dict[str, Any]:
    """:data:`LATE` jobs of the fleet made late; the check that announces them, then the
    steady checks (the late jobs followed at every check, the rest not read)."""
    late = [_name(i) for i in range(0, size, size // LATE)][:LATE]
    for j in late:
        store.commit([Merge(Key(STATUS, j), _late(j, now))])
    probe.reset()
    began = time.perf_counter()
    report = watcher.check()
    first = {"check_s": time.perf_counter() - began, "records_read": watcher.last_read}
    if len({a.job for a in report.fired}) != LATE:
        raise RuntimeError(f"{len(report.fired)} alert(s) fired for {LATE} late jobs")
    checks, read, trips = [], [], []
    for _ in range(repeats):
        probe.reset()
        start = store.round_trips
        began = time.perf_counter()
        report = watcher.check()
        checks.append(time.perf_counter() - began)
        read.append(watcher.last_read)
        trips.append(store.round_trips - start)
        if len(report.active) != LATE or report.fired:
            raise RuntimeError(f"late: {len(report.active)} active, {len(report.fired)} fired")
    return {
        "late": LATE,
        "first": first,
        "check_s": summary(checks),
        "records_read": read,
        "round_trips": trips,
    }
