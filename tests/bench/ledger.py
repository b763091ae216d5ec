"""Per-item ledger throughput (``ctx.items``) on each store, against two baselines on the same
store, written with the store's own SDK (not through cronwarden's adapters):

(a) **raw batched writes of the same records**: the page records the ledger writes (one per
    batch: its keys, fingerprints and states, written whole with the items *pending*, then
    again with the items *done*), in the same batches and commits as the ledger (commit k
    carries batch k-1's page, done, and batch k's page, pending), without the engine, the fence
    or the run. Goal: ledger ≥ 0.8x this. The floor "one write per item, batched" is reported
    beside it as context.
(b) **per-item conditional put, then update** (AWS Powertools' idempotency pattern): for each
    item, create-if-absent of an *in progress* record, then an update to *completed*, two round
    trips per item. Goal: ledger ≥ 10x this.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwarden import Engine, JobSet, RunRequest, job
from cronwarden.run.engine import OutcomeKind

from .emulators import Emulators
from .stats import summary

ITEMS = {"sqlite": 2000, "firestore": 500, "table": 500, "dynamodb": 500, "postgres": 2000}
PER_ITEM = {"sqlite": 500, "firestore": 150, "table": 150, "dynamodb": 150, "postgres": 500}
ITEMS["redis"], PER_ITEM["redis"] = 2000, 500
ITEMS["s3"] = ITEMS["blob"] = ITEMS["gcs"] = 500
PER_ITEM["s3"] = PER_ITEM["blob"] = PER_ITEM["gcs"] = 150
REPEATS = 5


def _record(key: str, state: str, run_id: str) -> dict[str, Any]:
    expire = (datetime.now(UTC) + timedelta(days=30)).isoformat(timespec="milliseconds")
    return {"key": key, "fp": "f" * 16, "state": state, "run_id": run_id, "expire_at": expire}


def _page(seq: int, keys: list[str], state: str, run_id: str) -> tuple[str, dict[str, Any]]:
    expire = (datetime.now(UTC) + timedelta(days=30)).isoformat(timespec="milliseconds")
    data = {
        "fence": 1,
        "seq": seq,
        "run_id": run_id,
        "keys": keys,
        "fps": ["f" * 32] * len(keys),
        "states": state * len(keys),
        "expire_at": expire,
    }
    return f"~page~{seq:06d}", data


def _stream(n: int, batch: int, run_id: str) -> list[list[tuple[str, dict[str, Any]]]]:
    """The ledger's commits of page records: each batch's page, pending, carrying the
    previous page's *done* marks; then the last page, done."""
    keys = [str(i) for i in range(n)]
    chunks = [keys[i : i + batch] for i in range(0, n, batch)]
    commits: list[list[tuple[str, dict[str, Any]]]] = []
    for seq, chunk in enumerate(chunks):
        page_id, data = _page(seq, chunk, "p", run_id)
        if seq:
            data["carried"] = {str(seq - 1): "d" * len(chunks[seq - 1])}
        commits.append([(page_id, data)])
    if chunks:
        commits.append([_page(len(chunks) - 1, chunks[-1], "d", run_id)])
    return commits


# -- native writers per store --------------------------------------------------------------
class _Native:
    """Batched commits and single-record create/update with the store's own SDK."""

    def batch(self, job: str, ops: list[tuple[str, dict[str, Any]]]) -> None:
        raise NotImplementedError

    def create(self, job: str, key: str, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def update(self, job: str, key: str, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _SQLite(_Native):
    def __init__(self, path: str) -> None:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS raw (job TEXT NOT NULL, id TEXT NOT NULL, "
            "data TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (job, id)) WITHOUT ROWID"
        )
        self.conn = conn

    def batch(self, job: str, ops: list[tuple[str, dict[str, Any]]]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(
            "INSERT OR REPLACE INTO raw VALUES (?, ?, ?, 1)",
            [(job, k, json.dumps(d, separators=(",", ":"))) for k, d in ops],
        )
        self.conn.execute("COMMIT")

    def create(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.conn.execute(  # autocommit: one transaction; fails if the key exists
            "INSERT INTO raw VALUES (?, ?, ?, 1)", (job, key, json.dumps(data))
        )

    def update(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.conn.execute(
            "UPDATE raw SET data = ?, version = version + 1 WHERE job = ? AND id = ?",
            (json.dumps(data), job, key),
        )

    def close(self) -> None:
        self.conn.close()


class _Firestore(_Native):
    def __init__(self, client: Any) -> None:
        self.client = client
        self.collection = client.collection(f"raw_{uuid.uuid4().hex[:6]}")

    def _ref(self, job: str, key: str) -> Any:
        return self.collection.document(f"{job}|{key}")

    def batch(self, job: str, ops: list[tuple[str, dict[str, Any]]]) -> None:
        batch = self.client.batch()
        for key, data in ops:
            batch.set(self._ref(job, key), {"job": job, "id": key, "d": data})
        batch.commit()

    def create(self, job: str, key: str, data: dict[str, Any]) -> None:
        self._ref(job, key).create({"job": job, "id": key, "d": data})

    def update(self, job: str, key: str, data: dict[str, Any]) -> None:
        self._ref(job, key).update({"d": data})


class _Table(_Native):
    def __init__(self, table: Any) -> None:
        self.table = table

    @staticmethod
    def _entity(job: str, key: str, data: dict[str, Any]) -> dict[str, Any]:
        from cronwarden.adapters.azure._entity import build_entity

        # the adapter's encoding (a list is one Edm.Binary property of compact JSON)
        return build_entity(f"raw-{job}", f"item:{key}", data)

    def batch(self, job: str, ops: list[tuple[str, dict[str, Any]]]) -> None:
        self.table.submit_transaction([("upsert", self._entity(job, k, d)) for k, d in ops])

    def create(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.table.create_entity(self._entity(job, key, data))

    def update(self, job: str, key: str, data: dict[str, Any]) -> None:
        from azure.data.tables import UpdateMode

        self.table.update_entity(self._entity(job, key, data), mode=UpdateMode.MERGE)


class _Dynamo(_Native):
    """DynamoDB: a commit is one TransactWriteItems of puts; create is a conditional put."""

    def __init__(self, store: Any) -> None:
        self.db, self.table = store._db, store.table

    def _item(self, job: str, key: str, data: dict[str, Any]) -> dict[str, Any]:
        from cronwarden.adapters.aws.store import encode

        item = {"pk": {"S": f"raw-{job}"}, "sk": {"S": f"item#{key}"}}
        item.update({f"f.{k}": encode(v) for k, v in data.items()})
        return item

    def batch(self, job: str, ops: list[tuple[str, dict[str, Any]]]) -> None:
        if ops:
            self.db.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": self.table, "Item": self._item(job, k, d)}}
                    for k, d in ops
                ]
            )

    def create(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.db.put_item(
            TableName=self.table,
            Item=self._item(job, key, data),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def update(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.db.put_item(TableName=self.table, Item=self._item(job, key, data))

    def close(self) -> None:
        pass


class _Postgres(_Native):
    """psycopg on its own connection: a batch is one transaction of one ``executemany`` (sent
    in pipeline mode), create / update one autocommit statement each."""

    def __init__(self, settings: Any) -> None:
        import psycopg

        self.conn = psycopg.connect(settings.dsn, autocommit=True)
        self.table = f'"{settings.schema}".raw_{uuid.uuid4().hex[:6]}'
        self.conn.execute(
            f"CREATE TABLE {self.table} (job text NOT NULL, id text NOT NULL, data jsonb NOT "
            "NULL, version bigint NOT NULL, PRIMARY KEY (job, id))"
        )

    def batch(self, job: str, ops: list[tuple[str, dict[str, Any]]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {self.table} AS r VALUES (%s, %s, %s::jsonb, 1) "
                "ON CONFLICT (job, id) DO UPDATE SET data = EXCLUDED.data, version = r.version + 1",
                [(job, k, json.dumps(d, separators=(",", ":"))) for k, d in ops],
            )

    def create(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.conn.execute(
            f"INSERT INTO {self.table} VALUES (%s, %s, %s::jsonb, 1)", (job, key, json.dumps(data))
        )

    def update(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.conn.execute(
            f"UPDATE {self.table} SET data = %s::jsonb, version = version + 1 "
            "WHERE job = %s AND id = %s",
            (json.dumps(data), job, key),
        )

    def close(self) -> None:
        self.conn.close()


class _Redis(_Native):
    """redis-py on its own client: a batch is one ``MULTI``/``EXEC`` pipeline of ``SET``s (one
    round trip), create ``SET NX``, update ``SET XX``; each record one JSON string."""

    def __init__(self, settings: Any) -> None:
        import redis

        self.client = redis.Redis.from_url(settings.url)
        self.prefix = f"{settings.prefix}:raw{uuid.uuid4().hex[:6]}"

    def batch(self, job: str, ops: list[tuple[str, dict[str, Any]]]) -> None:
        pipe = self.client.pipeline(transaction=True)
        for k, d in ops:
            pipe.set(f"{self.prefix}:{{{job}}}:{k}", json.dumps(d, separators=(",", ":")))
        pipe.execute()

    def create(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.client.set(f"{self.prefix}:{{{job}}}:{key}", json.dumps(data), nx=True)

    def update(self, job: str, key: str, data: dict[str, Any]) -> None:
        self.client.set(f"{self.prefix}:{{{job}}}:{key}", json.dumps(data), xx=True)

    def close(self) -> None:
        self.client.close()


class _Objects(_Native):
    """Object storage through its own client (:class:`ConditionalObjects`): a batch is one
    object holding its page records, written once; an item is an object of its own, created
    if absent, then replaced under its version (the per-item pattern)."""

    def __init__(self, store: Any) -> None:
        self.objects = store.objects
        self.versions: dict[str, str] = {}

    def batch(self, job: str, ops: list[tuple[str, dict[str, Any]]]) -> None:
        body = json.dumps(dict(ops), separators=(",", ":")).encode()
        self.objects.put_if_absent(f"raw/{job}/{uuid.uuid4().hex}", body)

    def create(self, job: str, key: str, data: dict[str, Any]) -> None:
        name = f"raw/{job}/{key}"
        self.versions[name] = self.objects.put_if_absent(name, json.dumps(data).encode())

    def update(self, job: str, key: str, data: dict[str, Any]) -> None:
        name = f"raw/{job}/{key}"
        self.objects.put_if_version(name, json.dumps(data).encode(), self.versions[name])

    def close(self) -> None:
        return None


def _native(name: str, store: Any, workdir: str) -> _Native:
    if name in ("s3", "blob", "gcs"):
        return _Objects(store)
    if name == "dynamodb":
        return _Dynamo(store)
    if name == "sqlite":
        return _SQLite(store._db.path)
    if name == "postgres":
        store.db.ensure_schema()  # the raw table lives in the store's schema
        return _Postgres(store.settings)
    if name == "redis":
        return _Redis(store.settings)
    if name == "firestore":
        return _Firestore(store.client)
    return _Table(store._table)


def _batches(native: _Native, job: str, commits: list[list[tuple[str, dict[str, Any]]]]) -> None:
    for ops in commits:
        native.batch(job, ops)


def _powertools(native: _Native, job: str, count: int) -> None:
    """Per item: conditional put of an *in progress* record, then its update to *completed*."""
    for i in range(count):
        key = str(i)
        native.create(job, key, _record(key, "in_progress", "x"))
        native.update(job, key, _record(key, "completed", "x"))


# -- the measurements ----------------------------------------------------------------------
def _ledger_run(engine: Engine, job: str, window: datetime) -> float:
    started = time.perf_counter()
    outcome = engine.execute(RunRequest(job, window))
    elapsed = time.perf_counter() - started
    if outcome.kind is not OutcomeKind.SUCCEEDED:
        raise RuntimeError(f"ledger run: {outcome}")
    return elapsed


def _timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure(emulators: Emulators, stores: list[str], repeats: int = REPEATS) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in stores:
        n, per_item_n = ITEMS[name], PER_ITEM[name]
        with emulators.store(name) as store:
            batch = 100  # the engine's default: a page each, on every store
            count = {"n": n}

            def handler(ctx: Any, count: dict[str, int] = count) -> None:
                for _ in ctx.items(range(count["n"])):
                    pass

            # The scheduled run of today's window of a daily job (the happy path), one job per
            # repeat for distinct run keys.
            names = [f"bench-ledger-{i}" for i in range(repeats + 1)]
            jobs = JobSet(job(j, cron="0 0 * * *", max_runtime="5m")(handler) for j in names)
            today = jobs[names[0]].schedule.floor(datetime.now(UTC))
            engine = Engine(jobs, store)
            native = _native(name, store, emulators.workdir)
            try:
                count["n"] = min(n, 2 * batch)
                _ledger_run(engine, names[-1], today)  # warm-up: clients, channels
                count["n"] = n
                # Interleaved: each repeat runs the ledger and every baseline back to back, and
                # the ratios are taken per repeat (load on a shared machine drifts over minutes).
                ledger, raw, floor, per_item, trips = [], [], [], [], []
                for rep in range(repeats):
                    before = store.round_trips
                    ledger.append(_ledger_run(engine, names[rep], today))
                    trips.append(store.round_trips - before)
                    commits = _stream(n, batch, f"raw{rep}")
                    raw.append(_timed(lambda c=commits, r=rep, w=native: _batches(w, f"a{r}", c)))
                    once = [(str(i), _record(str(i), "done", "x")) for i in range(n)]
                    per = min(2 * batch, store.max_commit_ops)  # Table Storage: 100 at most
                    chunks = [once[i : i + per] for i in range(0, n, per)]
                    floor.append(_timed(lambda c=chunks, r=rep, w=native: _batches(w, f"f{r}", c)))
                    per_item.append(
                        _timed(lambda r=rep, w=native, k=per_item_n: _powertools(w, f"p{r}", k))
                        * n
                        / per_item_n  # scaled to n items
                    )
            finally:
                native.close()
        rate = {
            "ledger": summary([n / s for s in ledger]),
            "raw_same_records": summary([n / s for s in raw]),
            "raw_one_write_per_item": summary([n / s for s in floor]),
            "per_item_put_update": summary([n / s for s in per_item]),
        }
        ratios = {
            "vs_raw": summary([b / a for a, b in zip(ledger, raw, strict=True)]),
            "vs_raw_floor": summary([b / a for a, b in zip(ledger, floor, strict=True)]),
            "vs_per_item": summary([b / a for a, b in zip(ledger, per_item, strict=True)]),
        }
        results[name] = {
            "items": n,
            "per_item_items": per_item_n,
            "batch_size": batch,
            "ledger_round_trips": trips[-1],
            "items_per_s": rate,
            "ratios": ratios,
            **{key: value["median"] for key, value in ratios.items()},
        }
    return results


# -- crash redo: the price of batching after a SIGKILL -----------------------------------------
#: (flush_every, batch_size) settings compared by :func:`crash_redo` ("default": the ledger's)
REDO_SETTINGS = [("default", 100), ("0.05", 100), ("none", 100), ("none", 10), ("none", 1)]


def crash_redo(spec: str, workdir: str, seeds: int = 5, items: int = 100) -> list[dict[str, Any]]:
    """Per setting: side effects repeated after a SIGKILL at a random item of ``items`` items
    of 5 ms (one owner process per attempt, ``tests.ledger.crash_worker``; the restart takes the
    run over once the dead owner's lease ran out), and the round trips of an uninterrupted run.
    ``spec``: ``sqlite:DIR`` (a fresh file per trial) or ``postgres:DSN`` (a fresh schema)."""
    import os
    import random
    import signal
    from pathlib import Path

    from tests.ledger import test_crash_redo as trial

    def fresh() -> str:
        if spec.startswith("sqlite:"):
            return f"sqlite:{os.path.join(workdir, uuid.uuid4().hex[:8])}.db"
        return f"{spec}#cw_redo_{uuid.uuid4().hex[:8]}"

    trial.ITEMS = items
    found = []
    for flush, batch in REDO_SETTINGS:
        extra = ["--items", str(items), "--flush-every", flush, "--batch-size", str(batch)]
        repeated = []
        for seed in range(seeds):
            store, effects = fresh(), Path(workdir) / f"fx-{uuid.uuid4().hex[:8]}.jsonl"
            owners = [trial.Owner(store, effects, *extra)]
            try:
                rng = random.Random(seed)
                kill_at = rng.randint(2, items - 10)
                trial.poll(lambda e=effects, k=kill_at: len(trial.read_effects(e)) >= k)
                time.sleep(rng.uniform(0, 0.006))  # a random point in the next item
                owners[0].signal(signal.SIGKILL)
                owners[0].proc.wait(timeout=10)
                trial.restart_until_done(store, effects, owners)
                lines = trial.read_effects(effects)
                first = {e["key"] for e in lines if e["pid"] == owners[0].proc.pid}
                again = [e for e in lines if e["pid"] != owners[0].proc.pid and e["key"] in first]
                if not all(e["uncertain"] for e in again):
                    raise RuntimeError(f"a repeated item was not flagged uncertain: {again}")
                repeated.append(len(again))
            finally:
                for owner in owners:
                    owner.close()
        clean = trial.Owner(fresh(), Path(workdir) / f"fx-{uuid.uuid4().hex[:8]}.jsonl", *extra)
        try:
            trips = clean.outcome()["round_trips"]
        finally:
            clean.close()
        found.append(
            {
                "flush_every": flush,
                "batch_size": batch,
                "repeated": repeated,
                "round_trips": trips,
            }
        )
    return found


if __name__ == "__main__":  # python -m tests.bench.ledger [postgres]: the crash-redo table
    import sys
    import tempfile

    where = tempfile.mkdtemp(prefix="cw-redo-")
    if sys.argv[1:] == ["postgres"]:
        from cronwarden.emulators.postgres import PostgresServer

        server = PostgresServer().start()
        try:
            rows = crash_redo(f"postgres:{server.dsn}", where)
        finally:
            server.stop()
    else:
        rows = crash_redo("sqlite:", where)
    print(json.dumps(rows, indent=1))
