"""Provider stacks for chaos trials: how to build a store and queue from a JSON-able spec (in the
test process and in every chaos worker process), fresh namespaces per trial, and outages.

* ``local``: SQLite store + SQLite queue in a fresh directory per trial.
* ``gcp``: Firestore + Pub/Sub on the official emulators, a fresh project id per trial.
* ``azure``: Table Storage on Azurite (a fresh table) + Service Bus on cronwarden's emulator
  (a fresh queue) per trial.
* ``aws``: DynamoDB + SQS on one moto server, a fresh table and queues per trial. moto serves
  both, so an outage of either part freezes both.
* ``postgres``: the Postgres store + queue on the session's PostgreSQL server, a fresh schema
  per trial; an outage (store or broker: one server holds both) freezes every server process.
* ``redis``: the Redis store + Streams queue on the session's redis-server, a fresh key prefix
  per trial; an outage (one server holds both) *restarts* the server: stopped (its append-only
  file flushed), down for the outage, started again on the same port and file, so clients see
  refused connections and lost replies, then a server that lost no acknowledged write.
* ``s3``: the object store on S3 + SQS, both on the session's moto server, a fresh bucket and
  queues per trial (an outage of either part freezes both, as for ``aws``).
* ``blob``: the object store on Azure Blob Storage (an Azurite with its Blob service, a fresh
  container per trial) + Service Bus on cronwarden's emulator (a fresh queue).
* ``gcs``: the object store on Google Cloud Storage (fake-gcs-server, a fresh bucket per trial)
  + Pub/Sub on the official emulator (a fresh project).

Outages. The emulators keep their state in memory, so killing and restarting one would be a
wipe (disaster recovery), not an outage: an outage here *freezes* the emulator's whole process
group (SIGSTOP) for a while and thaws it (SIGCONT); clients see timeouts / hangs, state survives.
For SQLite, renaming or chmod-ing the file does not affect connections already open (they hold
the inode), so the outage holds an EXCLUSIVE lock on the database file instead: every writer
blocks (and times out with ``database is locked``), which is what an unreachable store looks like
to the engine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cronwarden.model.ports import Queue, Store

PROVIDERS = ("local", "gcp", "azure", "aws", "postgres", "redis", "s3", "blob", "gcs")


def build(spec: dict[str, Any]) -> tuple[Store, Queue]:
    """The store and queue a spec describes (imports each SDK only when needed)."""
    kind = spec["kind"]
    if kind == "local":
        from cronwarden.adapters.local import SQLiteQueue, SQLiteStore

        return (
            SQLiteStore(os.path.join(spec["dir"], "state.db")),
            SQLiteQueue(
                os.path.join(spec["dir"], "queue.db"), max_deliveries=spec["max_deliveries"]
            ),
        )
    if kind == "gcp":
        from cronwarden.adapters.gcp import FirestoreStore, PubSubQueue

        store = FirestoreStore(spec["project"], emulator_host=spec["firestore"])
        queue = PubSubQueue(
            spec["project"],
            "runs",
            "worker",
            max_deliveries=spec["max_deliveries"],
            ack_deadline=10,
            retry_backoff=(0.0, 1.0),
            emulator_host=spec["pubsub"],
            create_missing=True,
            rpc_timeout=10.0,
        )
        return store, queue
    if kind == "azure":
        from cronwarden.adapters.azure import ServiceBusQueue, TableStore

        store = TableStore.from_connection_string(spec["tables"], spec["table"])
        sbq = ServiceBusQueue.from_connection_string(
            spec["servicebus"], spec["queue"], max_deliveries=spec["max_deliveries"]
        )
        return store, sbq
    if kind == "aws":
        from cronwarden.adapters.aws import AwsSettings, DynamoStore, SqsQueue

        settings = AwsSettings(
            endpoint_url=spec["endpoint"],
            table=spec["table"],
            queue=spec["queue"],
            max_receive_count=spec["max_deliveries"],
            create_missing=True,
            read_timeout=10.0,
            max_attempts=2,
        )
        return DynamoStore.from_settings(settings), SqsQueue.from_settings(settings)
    if kind == "postgres":
        from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore

        settings = PostgresSettings(
            dsn=spec["dsn"],
            schema=spec["schema"],
            max_deliveries=spec["max_deliveries"],
            statement_timeout=5,  # the client gives up on a frozen server 5 s later
            connect_timeout=2,
            pool_timeout=5,
            expire_every=0,
        )
        return PostgresStore(settings), PostgresQueue(settings)
    if kind == "redis":
        from cronwarden.adapters.redis import RedisQueue, RedisSettings, RedisStore

        redis_settings = RedisSettings(
            url=spec["url"],
            prefix=spec["prefix"],
            max_deliveries=spec["max_deliveries"],
            timeout=5,  # the client gives up on a silent server 5 s later
        )
        return RedisStore(redis_settings), RedisQueue(redis_settings)
    if kind == "s3":
        from cronwarden.adapters.aws import AwsSettings, SqsQueue
        from cronwarden.adapters.objectstore import ObjectStore, S3Objects, S3Settings

        aws = AwsSettings(
            endpoint_url=spec["endpoint"],
            queue=spec["queue"],
            max_receive_count=spec["max_deliveries"],
            create_missing=True,
            read_timeout=10.0,
            max_attempts=2,
        )
        s3 = S3Settings(bucket=spec["bucket"], aws=aws)
        return ObjectStore(S3Objects.from_settings(s3)), SqsQueue.from_settings(aws)
    if kind == "blob":
        from cronwarden.adapters.azure import ServiceBusQueue
        from cronwarden.adapters.objectstore import ObjectStore
        from cronwarden.adapters.objectstore.azure_blobs import BlobObjects

        objects = BlobObjects.from_connection_string(
            spec["blobs"], spec["container"], create_missing=True
        )
        sbq = ServiceBusQueue.from_connection_string(
            spec["servicebus"], spec["queue"], max_deliveries=spec["max_deliveries"]
        )
        return ObjectStore(objects), sbq
    if kind == "gcs":
        from cronwarden.adapters.gcp import PubSubQueue
        from cronwarden.adapters.objectstore import ObjectStore
        from cronwarden.adapters.objectstore.gcs import GcsObjects

        gcs = GcsObjects.connect(spec["bucket"], emulator_host=spec["gcs"], create_missing=True)
        queue = PubSubQueue(
            spec["project"],
            "runs",
            "worker",
            max_deliveries=spec["max_deliveries"],
            ack_deadline=10,
            retry_backoff=(0.0, 1.0),
            emulator_host=spec["pubsub"],
            create_missing=True,
            rpc_timeout=10.0,
        )
        return ObjectStore(gcs), queue
    raise ValueError(f"unknown stack {kind!r}")


def _freeze(pgids: list[int], sig: int) -> None:
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


@dataclass
class Stack:
    """One provider's emulators (if any) plus a fresh namespace per trial."""

    name: str
    emulators: dict[str, Any] = field(default_factory=dict)

    def new_spec(self, tmp: Path, *, max_deliveries: int = 5) -> dict[str, Any]:
        if self.name == "local":
            folder = tmp / f"local-{uuid.uuid4().hex[:6]}"
            folder.mkdir(parents=True)
            return {"kind": "local", "dir": str(folder), "max_deliveries": max_deliveries}
        if self.name == "gcp":
            return {
                "kind": "gcp",
                "project": f"cw-chaos-{uuid.uuid4().hex[:10]}",
                "firestore": self.emulators["firestore"].address,
                "pubsub": self.emulators["pubsub"].address,
                "max_deliveries": max(5, max_deliveries),
            }
        if self.name == "aws":
            suffix = uuid.uuid4().hex[:10]
            return {
                "kind": "aws",
                "endpoint": self.emulators["moto"].endpoint,
                "table": f"cw-chaos-{suffix}",
                "queue": f"cw-chaos-{suffix}",
                "max_deliveries": max_deliveries,
            }
        if self.name == "s3":
            suffix = uuid.uuid4().hex[:10]
            return {
                "kind": "s3",
                "endpoint": self.emulators["moto"].endpoint,
                "bucket": f"cw-chaos-{suffix}",
                "queue": f"cw-chaos-{suffix}",
                "max_deliveries": max_deliveries,
            }
        if self.name == "gcs":
            return {
                "kind": "gcs",
                "bucket": f"cw-chaos-{uuid.uuid4().hex[:10]}",
                "gcs": self.emulators["gcs"].endpoint,
                "project": f"cw-chaos-{uuid.uuid4().hex[:10]}",
                "pubsub": self.emulators["pubsub"].address,
                "max_deliveries": max(5, max_deliveries),
            }
        if self.name == "blob":
            sb = self.emulators["servicebus"]
            return {
                "kind": "blob",
                "blobs": self.emulators["azurite_blob"].connection_string,
                "container": f"cw-chaos-{uuid.uuid4().hex[:10]}",
                "servicebus": sb.connection_string,
                "queue": sb.create_queue(
                    max_delivery_count=max_deliveries,
                    lock_duration=5.0,
                    requires_duplicate_detection=True,
                ),
                "max_deliveries": max_deliveries,
            }
        if self.name == "postgres":
            return {
                "kind": "postgres",
                "dsn": self.emulators["postgres"].dsn,
                "schema": f"chaos_{uuid.uuid4().hex[:10]}",
                "max_deliveries": max_deliveries,
            }
        if self.name == "redis":
            return {
                "kind": "redis",
                "url": self.emulators["redis"].url,
                "prefix": f"chaos{uuid.uuid4().hex[:10]}",
                "max_deliveries": max_deliveries,
            }
        azurite, sb = self.emulators["azurite"], self.emulators["servicebus"]
        queue = sb.create_queue(
            max_delivery_count=max_deliveries,
            lock_duration=5.0,
            requires_duplicate_detection=True,
        )
        return {
            "kind": "azure",
            "tables": azurite.connection_string,
            "table": azurite.new_table("chaos"),
            "servicebus": sb.connection_string,
            "queue": queue,
            "max_deliveries": max_deliveries,
        }

    def drop(self, spec: dict[str, Any]) -> None:
        if spec["kind"] == "blob":
            with contextlib.suppress(Exception):
                self.emulators["servicebus"].delete_queue(spec["queue"])
        if spec["kind"] == "postgres":
            from cronwarden.emulators.postgres.pytest_plugin import drop_schema

            with contextlib.suppress(Exception):
                drop_schema(spec["dsn"], spec["schema"])
        if spec["kind"] == "redis":
            from cronwarden.emulators.redis.pytest_plugin import delete_prefix

            with contextlib.suppress(Exception):
                delete_prefix(spec["url"], spec["prefix"])
        if spec["kind"] == "azure":
            with contextlib.suppress(Exception):
                self.emulators["servicebus"].delete_queue(spec["queue"])
            with contextlib.suppress(Exception):
                self.emulators["azurite"].drop_table(spec["table"])

    # -- outages ----------------------------------------------------------------------------
    def _pgids(self, part: str) -> list[int]:
        if self.name in ("gcp", "gcs"):
            emulator = self.emulators[
                ("firestore" if self.name == "gcp" else "gcs") if part == "store" else "pubsub"
            ]
            return [emulator.pid]
        if self.name in ("aws", "s3"):
            return [self.emulators["moto"].pid]
        if self.name == "blob":
            blob = self.emulators["azurite_blob"]
            return blob.pids[1:] if part == "store" else [self.emulators["servicebus"].pid]
        if part == "store":
            return list(self.emulators["azurite"].pids)
        return [self.emulators["servicebus"].pid]

    @contextlib.contextmanager
    def outage(self, part: str, spec: dict[str, Any]) -> Iterator[None]:
        """``part`` ("store" or "broker") is unavailable inside the block."""
        if self.name == "local":
            path = os.path.join(spec["dir"], "state.db" if part == "store" else "queue.db")
            holder = _LockHolder(path)
            holder.start()
            holder.locked.wait(30)
            try:
                yield
            finally:
                holder.release.set()
                holder.join(30)
            return
        if self.name == "postgres":
            server = self.emulators["postgres"]
            if not hasattr(server, "freeze"):
                raise RuntimeError("an outage needs the test's own server, not an external DSN")
            server.freeze()
            try:
                yield
            finally:
                server.thaw()
            return
        if self.name == "redis":
            server = self.emulators["redis"]
            server.stop(keep_directory=True)
            try:
                yield
            finally:
                server.start()
            return
        pgids = self._pgids(part)
        _freeze(pgids, signal.SIGSTOP)
        try:
            yield
        finally:
            _freeze(pgids, signal.SIGCONT)


class _LockHolder(threading.Thread):
    """Holds an EXCLUSIVE transaction on a SQLite file until released."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.locked = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            conn.execute("BEGIN EXCLUSIVE")
            self.locked.set()
            self.release.wait(120)
            conn.execute("ROLLBACK")
        finally:
            conn.close()
