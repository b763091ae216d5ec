"""``cronwarden doctor`` on the GCP (Firestore + Pub/Sub emulators) and Azure (Azurite + the
Service Bus emulator) stacks, healthy and deliberately broken: a missing dead-letter policy,
a wrong subscription / queue, a delivery limit below a job's retry budget, a store it may not
write (Azurite SAS without write permission; Firestore's emulator enforces no IAM, see
test_doctor.py for that case)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import cronwarden
from cronwarden import JobSet, RunContext
from cronwarden.ops.doctor import Check, Doctor, failed


def _jobs(attempts: int) -> JobSet:
    def nightly(ctx: RunContext) -> None:
        return None

    retry = cronwarden.Retry(max_attempts=attempts)
    return JobSet(
        [cronwarden.job("nightly", cron="0 2 * * *", max_runtime="10m", retry=retry)(nightly)]
    )


class Pair:
    """A provider made of one store and one queue (what doctor reads from a provider)."""

    def __init__(self, name: str, store: Any, queue: Any) -> None:
        self.name, self._store, self._queue = name, store, queue

    def store(self) -> Any:
        return self._store

    def queue(self) -> Any:
        return self._queue

    def close(self) -> None:
        self._queue.close()
        self._store.close()


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def _doctor(jobs: JobSet, provider: Pair) -> Doctor:
    return Doctor(jobs, provider, worker_wait=0.0, probe_timeout=30)  # type: ignore[arg-type]


# -- GCP ------------------------------------------------------------------------------------
@pytest.fixture
def gcp(firestore_emulator: Any, pubsub_emulator: Any) -> dict[str, Any]:
    return {"fs": firestore_emulator.address, "ps": pubsub_emulator.address}


def _gcp_pair(hosts: dict[str, Any], **queue: Any) -> Pair:
    from cronwarden.adapters.gcp import FirestoreStore, PubSubQueue

    project = f"cw-doc-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {
        "retry_backoff": (0.0, 1.0),
        "emulator_host": hosts["ps"],
        "create_missing": True,
        **queue,
    }
    names = (options.pop("topic", "runs"), options.pop("subscription", "worker"))
    return Pair(
        "gcp",
        FirestoreStore(project, emulator_host=hosts["fs"]),
        PubSubQueue(project, *names, **options),
    )


@pytest.mark.gcp
def test_gcp_healthy_then_broken(gcp: dict[str, Any]) -> None:
    pair = _gcp_pair(gcp, max_deliveries=5)
    try:
        checks = _doctor(_jobs(5), pair).run()
        got = _by_name(checks)
        assert got["store"].ok and got["queue"].ok, [c.line() for c in checks]
        assert got["dead-letter queue"].ok and got["delivery limit"].ok
        assert got["schedules"].ok is None and "cannot check" in got["schedules"].detail
        assert {c.name for c in failed(checks)} == {"watcher"}  # no watcher ran here

        # a delivery limit that disagrees with a job's retry budget
        bad = _by_name(_doctor(_jobs(8), pair).check_dead_letters())
        assert bad["delivery limit for nightly"].ok is False
        assert "after 5 deliveries but nightly allows 8" in bad["delivery limit for nightly"].detail

        # a subscription that lost its dead-letter policy
        from google.protobuf import field_mask_pb2

        queue = pair.queue()
        queue.subscriber.update_subscription(
            request={
                "subscription": {"name": queue.subscription, "dead_letter_policy": None},
                "update_mask": field_mask_pb2.FieldMask(paths=["dead_letter_policy"]),
            }
        )
        [missing] = _doctor(_jobs(5), pair).check_dead_letters()
        assert missing.ok is False and "no dead-letter policy" in missing.detail
    finally:
        pair.close()


@pytest.mark.gcp
def test_gcp_wrong_subscription_fails_the_queue_check(gcp: dict[str, Any]) -> None:
    right = _gcp_pair(gcp)
    right.queue().ensure_resources()
    from cronwarden.adapters.gcp import PubSubQueue

    wrong = PubSubQueue(
        right.queue().project, "runs", "no-such-subscription", emulator_host=gcp["ps"]
    )
    pair = Pair("gcp", right.store(), wrong)
    try:
        [check] = _doctor(_jobs(5), pair).check_queue()
        assert check.ok is False and "cannot receive" in check.detail
        assert "subscription" in check.fix
    finally:
        right.queue().close()
        pair.close()


# -- Azure ----------------------------------------------------------------------------------
def _azure_pair(azurite: Any, table: str, sb: Any, name: str, **queue: Any) -> Pair:
    from cronwarden.adapters.azure import TableStore
    from cronwarden.adapters.azure.servicebus import ServiceBusQueue

    return Pair(
        "azure",
        TableStore.from_connection_string(azurite.connection_string, table),
        ServiceBusQueue.from_connection_string(sb.connection_string, name, **queue),
    )


@pytest.mark.azure
def test_azure_healthy_and_a_broker_limit_below_the_retry_budget(
    azurite: Any, azurite_table: str, servicebus_emulator: Any
) -> None:
    name = servicebus_emulator.create_queue(max_delivery_count=10)
    pair = _azure_pair(azurite, azurite_table, servicebus_emulator, name, max_deliveries=10)
    try:
        checks = _doctor(_jobs(5), pair).run()
        got = _by_name(checks)
        assert got["store"].ok and got["queue"].ok, [c.line() for c in checks]
        assert got["dead-letter queue"].ok and got["delivery limit"].ok
        assert "measured: dead-lettered after 10 deliveries" in got["dead-letter queue"].detail
        assert got["schedules"].ok is None and "ARM" in got["schedules"].detail
        assert pair.queue().dlq_depth() == 0  # the probe left nothing behind
    finally:
        pair.close()

    # the queue says MaxDeliveryCount 2 while the adapter was told 10: measured, not believed
    low = servicebus_emulator.create_queue(max_delivery_count=2)
    pair = _azure_pair(azurite, azurite_table, servicebus_emulator, low, max_deliveries=10)
    try:
        pair.queue().publish(b"real run request", attributes={"k": "v"})
        got = _by_name(_doctor(_jobs(5), pair).check_dead_letters())
        check = got["delivery limit for nightly"]
        assert check.ok is False and "after 2 deliveries but nightly allows 5" in check.detail
        # the real message is still there, not dead-lettered by the measurement
        [delivery] = pair.queue().receive(1, wait=5)
        assert delivery.body == b"real run request"
        pair.queue().ack(delivery)
        assert pair.queue().dlq_depth() == 0
    finally:
        pair.close()


@pytest.mark.azure
def test_azure_wrong_queue_and_a_read_only_store(
    azurite: Any, azurite_table: str, servicebus_emulator: Any
) -> None:
    from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
    from azure.data.tables import TableSasPermissions, generate_table_sas

    from cronwarden.adapters.azure import TableStore

    name = servicebus_emulator.create_queue()
    pair = _azure_pair(azurite, azurite_table, servicebus_emulator, f"{name}-wrong")
    try:
        [check] = _doctor(_jobs(5), pair).check_queue()
        assert check.ok is False and "queue name" in check.fix
    finally:
        pair.close()

    TableStore.from_connection_string(azurite.connection_string, azurite_table).close()
    parts = dict(p.split("=", 1) for p in azurite.connection_string.split(";") if "=" in p)
    sas = generate_table_sas(
        AzureNamedKeyCredential(parts["AccountName"], parts["AccountKey"]),
        azurite_table,
        permission=TableSasPermissions(read=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    store = TableStore.from_account_url(
        azurite.table_endpoint, AzureSasCredential(sas), azurite_table, create_table=False
    )

    class StoreOnly:
        name = "azure"

        def store(self) -> Any:
            return store

    try:
        [check] = Doctor(_jobs(5), StoreOnly()).check_store()  # type: ignore[arg-type]
    finally:
        store.close()
    assert check.ok is False and "Storage Table Data Contributor" in check.fix


# -- drill on the cloud stores ----------------------------------------------------------------
def _drill_on(store: Any, http_sink: Any) -> None:
    from cronwarden.model.ports import RUN, STATUS, Key
    from cronwarden.ops.drill import Drill
    from cronwarden.watch.alerting.settings import load_settings

    def nightly(ctx: RunContext) -> None:
        return None

    job = cronwarden.job("nightly", cron="0 2 * * *", max_runtime="10m", owner="team-data")(nightly)
    toml = f'[channels.data]\ntype = "slack"\nurl = "{http_sink.base}/d"\nowners = ["team-data"]\n'
    router = load_settings(env={"CRONWARDEN_ALERTING_TOML": toml}).router()
    report = Drill(job, store, router).run()
    assert report.ok, [s.line() for s in report.steps]
    assert len(http_sink.at("/d")) == 1
    assert store.query(RUN, "_drill-nightly") == []
    assert store.get(Key(STATUS, "_drill-nightly")) is None
    assert store.get(Key(STATUS, "nightly")) is None  # the real job untouched


@pytest.mark.gcp
def test_drill_on_firestore(gcp: dict[str, Any], http_sink: Any) -> None:
    from cronwarden.adapters.gcp import FirestoreStore

    store = FirestoreStore(f"cw-drill-{uuid.uuid4().hex[:8]}", emulator_host=gcp["fs"])
    try:
        _drill_on(store, http_sink)
    finally:
        store.close()


@pytest.mark.azure
def test_drill_on_table_storage(azurite: Any, azurite_table: str, http_sink: Any) -> None:
    from cronwarden.adapters.azure import TableStore

    store = TableStore.from_connection_string(azurite.connection_string, azurite_table)
    try:
        _drill_on(store, http_sink)
    finally:
        store.close()
