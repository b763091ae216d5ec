"""Broker throughput on the emulators, same message count and size for both:

* **Service Bus** (cronwarden's emulator, through the real ``azure-servicebus`` SDK): send, then
  receive in peek-lock + complete each message; batch 1 and 100 — the measurement of
  :mod:`tests.bench.servicebus_bench` (``run``), folded in here.
* **Pub/Sub** (the official emulator, through the plain GAPIC clients our adapter uses):
  ``publish`` of 1 or 100 messages per RPC, then synchronous ``pull`` of up to the batch size +
  one ``acknowledge`` per pull.
* **Postgres** (a private server, through the adapter): one ``publish`` per message (batch size
  applies to ``receive``), then ``receive`` of up to the batch size + one ``ack`` per message.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from .emulators import Emulators, fresh_project
from .stats import summary

MESSAGES = 1000
SIZE = 1024
BATCHES = (1, 100)
REPEATS = 3


def _pubsub_run(emulator: Any, messages: int, batch: int, size: int) -> dict[str, float]:
    from google import pubsub_v1

    from cronwarden.adapters.gcp._clients import pubsub_clients

    publisher, subscriber = pubsub_clients(emulator.address)
    project = fresh_project()
    topic = f"projects/{project}/topics/t{uuid.uuid4().hex[:6]}"
    sub = f"projects/{project}/subscriptions/s{uuid.uuid4().hex[:6]}"
    publisher.create_topic(name=topic)
    subscriber.create_subscription(name=sub, topic=topic, ack_deadline_seconds=60)
    body = b"x" * size
    try:
        publisher.publish(topic=topic, messages=[pubsub_v1.PubsubMessage(data=body)])  # warm-up
        started = time.perf_counter()
        for _ in range(messages // batch):
            publisher.publish(
                topic=topic, messages=[pubsub_v1.PubsubMessage(data=body) for _ in range(batch)]
            )
        send_s = time.perf_counter() - started
        received = 0
        started = time.perf_counter()
        while received < messages + 1:
            reply = subscriber.pull(
                subscription=sub, max_messages=batch, return_immediately=False, timeout=10
            )
            if not reply.received_messages:
                break
            subscriber.acknowledge(
                subscription=sub, ack_ids=[m.ack_id for m in reply.received_messages]
            )
            received += len(reply.received_messages)
        recv_s = time.perf_counter() - started
    finally:
        subscriber.delete_subscription(subscription=sub)
        publisher.delete_topic(topic=topic)
    return {
        "send_per_s": messages / send_s,
        "receive_complete_per_s": received / recv_s,
        "end_to_end_per_s": messages / (send_s + recv_s),
    }


def _servicebus_run(emulator: Any, messages: int, batch: int, size: int) -> dict[str, float]:
    from .servicebus_bench import run

    queue = emulator.create_queue(lock_duration=60)
    try:
        return run(emulator.connection_string, queue, messages, batch, size)
    finally:
        emulator.delete_queue(queue)


def _postgres_run(settings: Any, messages: int, batch: int, size: int) -> dict[str, float]:
    """The Postgres queue adapter itself (one statement per publish, receive and ack)."""
    from cronwarden.adapters.postgres import PostgresQueue

    queue = PostgresQueue(settings)
    body = b"x" * size
    try:
        queue.publish(body)  # warm-up: pool, schema
        started = time.perf_counter()
        for _ in range(messages):
            queue.publish(body)
        send_s = time.perf_counter() - started
        received = 0
        started = time.perf_counter()
        while received < messages + 1:
            got = queue.receive(batch, visibility=60, wait=1.0)
            if not got:
                break
            for delivery in got:
                queue.ack(delivery)
            received += len(got)
        recv_s = time.perf_counter() - started
    finally:
        queue.close()
    return {
        "send_per_s": messages / send_s,
        "receive_complete_per_s": received / recv_s,
        "end_to_end_per_s": messages / (send_s + recv_s),
    }


def measure(
    emulators: Emulators,
    brokers: list[str],
    messages: int = MESSAGES,
    size: int = SIZE,
    repeats: int = REPEATS,
) -> dict[str, Any]:
    runners = {
        "servicebus": (_servicebus_run, emulators.servicebus),
        "pubsub": (_pubsub_run, emulators.pubsub),
        "postgres": (_postgres_run, emulators.postgres_settings),
    }
    results: dict[str, Any] = {}
    for name in brokers:
        runner, emulator = runners[name]
        rows = {}
        for batch in BATCHES:
            runs = [runner(emulator(), messages, batch, size) for _ in range(repeats)]
            rows[str(batch)] = {
                key: summary([r[key] for r in runs])
                for key in ("send_per_s", "receive_complete_per_s", "end_to_end_per_s")
            }
        results[name] = {"messages": messages, "size": size, "batches": rows}
    if "servicebus" in results and emulators.startup_s.get("servicebus") is not None:
        results["servicebus"]["emulator_rss_mib"] = emulators.servicebus().rss_bytes() / 2**20
    return results
