"""Fixtures for the Service Bus emulator tests: a fresh queue per test, SDK clients."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")
pytest.importorskip("proton")

from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage, ServiceBusReceiver

from cronwarden.emulators.servicebus.pytest_plugin import ServiceBusEmulator

pytestmark = pytest.mark.azure


@pytest.fixture
def sb(servicebus_emulator: ServiceBusEmulator) -> ServiceBusEmulator:
    return servicebus_emulator


@pytest.fixture
def queue(sb: ServiceBusEmulator) -> Iterator[str]:
    """A fresh queue with a short lock (1 s) and max delivery count 3."""
    name = sb.create_queue(lock_duration=1.0, max_delivery_count=3)
    yield name
    sb.delete_queue(name)


@pytest.fixture
def make_queue(sb: ServiceBusEmulator) -> Iterator[Callable[..., str]]:
    created: list[str] = []

    def make(**props: Any) -> str:
        name = sb.create_queue(**props)
        created.append(name)
        return name

    yield make
    for name in created:
        sb.delete_queue(name)


@pytest.fixture
def client(sb: ServiceBusEmulator) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(sb.connection_string, retry_total=1) as c:
        yield c


def receive(
    receiver: ServiceBusReceiver, count: int, *, deadline: float = 10.0
) -> list[ServiceBusReceivedMessage]:
    """Receive until ``count`` messages arrived or ``deadline`` seconds passed."""
    end = time.monotonic() + deadline
    got: list[ServiceBusReceivedMessage] = []
    while len(got) < count and time.monotonic() < end:
        wait = max(0.1, min(2.0, end - time.monotonic()))
        got += receiver.receive_messages(max_message_count=count - len(got), max_wait_time=wait)
    return got


def wait_for(predicate: Callable[[], bool], *, deadline: float = 10.0) -> None:
    """Poll ``predicate`` until true; fail at the deadline."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met before the deadline")
