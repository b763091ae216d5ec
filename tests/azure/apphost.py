"""Building the Azure function app against Azurite + the Service Bus emulator, hosted in-process
by ``cronwarden.emulators.azure_functions.host.LocalHost`` (the Functions host's stand-in)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cronwarden import JobSet
from cronwarden.adapters.azure import AzureProvider, ServiceBusQueue, TableStore
from cronwarden.adapters.azure.functions import AzureRuntime, build_app, runtime_of
from cronwarden.adapters.azure.settings import SERVICEBUS_BINDING_CONNECTION, AzureSettings
from cronwarden.emulators.azure_functions.host import LocalHost
from cronwarden.emulators.azurite import Azurite
from tests.support.harness import FakeClock


@dataclass
class Deployed:
    app: Any
    host: LocalHost
    provider: AzureProvider
    queue_name: str
    clock: FakeClock

    @property
    def runtime(self) -> AzureRuntime:
        return runtime_of(self.app)

    @property
    def store(self) -> TableStore:
        return self.provider.store()

    @property
    def queue(self) -> ServiceBusQueue:
        return self.provider.queue()

    def deliver_until(self, predicate: Any, *, deadline: float = 30.0, what: str = "") -> None:
        """Play the host's Service Bus trigger until ``predicate()`` holds."""
        import time

        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if predicate():
                return
            self.host.deliver(wait=0.5)
        raise AssertionError(f"{what or 'condition'} not reached within {deadline}s")


@contextlib.contextmanager
def deployed(
    jobs: JobSet | Any,
    azurite: Azurite,
    servicebus: Any,
    table: str,
    *,
    start: datetime = datetime(2026, 1, 20, 2, 0, tzinfo=UTC),
    dedup: bool = True,
    lock_duration: float = 5.0,
    max_deliveries: int = 10,
    env: dict[str, str] | None = None,
) -> Iterator[Deployed]:
    queue_name = servicebus.create_queue(
        max_delivery_count=max_deliveries,
        lock_duration=lock_duration,
        requires_duplicate_detection=dedup,
    )
    provider = AzureProvider(
        connection_string=azurite.connection_string,
        table=table,
        servicebus_connection=servicebus.connection_string,
        queue_name=queue_name,
        max_deliveries=max_deliveries,
    )
    clock = FakeClock(start)
    app_env = {**AzureSettings(queue=queue_name).to_env(), **(env or {})}
    app = build_app(jobs, provider=provider, env=app_env, clock=clock)
    binding = {SERVICEBUS_BINDING_CONNECTION: servicebus.connection_string}
    host = LocalHost(app, env=binding, clock=clock)
    try:
        yield Deployed(app, host, provider, queue_name, clock)
    finally:
        host.close()
        provider.close()
        servicebus.delete_queue(queue_name)
