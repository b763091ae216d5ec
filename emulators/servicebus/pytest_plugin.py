"""pytest plugin: the ``servicebus_emulator`` fixture (session scope).

It starts ``python -m cronwarden.emulators.servicebus`` on free loopback ports in its own process
group (``ManagedProcess``), waits for the admin API to answer, yields a
:class:`ServiceBusEmulator` handle, and stops the process group at the end of the session.

Tests should isolate themselves with :meth:`ServiceBusEmulator.create_queue` (a fresh, uniquely
named queue with the properties the test needs) or :meth:`ServiceBusEmulator.reset`.
Importing this module needs neither proton nor the Azure SDK.
"""

from __future__ import annotations

import json
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from cronwarden.emulators._process import LOOPBACK, ManagedProcess, free_port, http_ok

from .config import QueueConfig, format_duration, load_config


@dataclass
class ServiceBusEmulator:
    """A running emulator process and helpers to drive it from tests."""

    host: str
    port: int
    admin_port: int
    process: ManagedProcess
    queue_names: list[str] = field(default_factory=list)

    @property
    def connection_string(self) -> str:
        return (
            f"Endpoint=sb://{self.host}:{self.port};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
        )

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        if not self.admin_url.startswith("http://"):
            raise ValueError("the admin API is plain HTTP on loopback")
        url = self.admin_url + path
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - http only
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 - http only
            payload = reply.read()
        try:
            return json.loads(payload)
        except ValueError:
            return payload.decode()

    def reset(self) -> None:
        """Every configured queue back to empty; queues created by tests are removed."""
        self._request("POST", "/reset")

    def create_queue(
        self,
        name: str | None = None,
        *,
        max_delivery_count: int = 10,
        lock_duration: float = 60.0,
        default_ttl: float | None = None,
        dead_lettering_on_expiration: bool = False,
        requires_duplicate_detection: bool = False,
        duplicate_detection_window: float = 600.0,
    ) -> str:
        """Create (or reconfigure) a queue; durations in seconds. Returns its name."""
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        QueueConfig(  # validate here, so a bad value fails in the test, not in the server
            name,
            max_delivery_count,
            lock_duration,
            default_ttl,
            dead_lettering_on_expiration,
            requires_duplicate_detection,
            duplicate_detection_window,
        )
        props: dict[str, Any] = {
            "MaxDeliveryCount": max_delivery_count,
            "LockDuration": format_duration(lock_duration),
            "DeadLetteringOnMessageExpiration": dead_lettering_on_expiration,
            "RequiresDuplicateDetection": requires_duplicate_detection,
            "DuplicateDetectionHistoryTimeWindow": format_duration(duplicate_detection_window),
        }
        if default_ttl is not None:
            props["DefaultMessageTimeToLive"] = format_duration(default_ttl)
        self._request("PUT", f"/queues/{name}", props)
        return name

    def delete_queue(self, name: str) -> None:
        self._request("DELETE", f"/queues/{name}")

    def expire_locks(self, name: str) -> int:
        """End every lock held on queue ``name`` now, as when its LockDuration elapses: the
        messages are available again (delivery count + 1) and the holders' renewals and
        settlements fail with lock-lost. Returns how many locks ended."""
        result: dict[str, int] = self._request("POST", f"/queues/{name}/expire-locks")
        return int(result["expired"])

    def queues(self) -> list[dict[str, Any]]:
        """Per-queue counts: messages, active, deferred, scheduled, locked, dead_letter."""
        result: list[dict[str, Any]] = self._request("GET", "/queues")
        return result

    def rss_bytes(self) -> int:
        """Resident set size of the emulator process (Linux /proc)."""
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("VmRSS not found")


def start_emulator(
    log_path: str, *, host: str = LOOPBACK, config_path: str | None = None
) -> ServiceBusEmulator:
    """Launch the emulator process and wait until it answers. Without ``config_path`` it has
    the built-in queues (:func:`~.config.default_config`)."""
    port, admin_port = free_port(host), free_port(host)
    argv = [
        sys.executable,
        "-m",
        "cronwarden.emulators.servicebus",
        "--host",
        host,
        "--port",
        str(port),
        "--admin-port",
        str(admin_port),
    ]
    if config_path is not None:
        argv += ["--config", config_path]
    process = ManagedProcess("servicebus-emulator", argv, log_path).start()
    emulator = ServiceBusEmulator(
        host=host,
        port=port,
        admin_port=admin_port,
        process=process,
        queue_names=[q.name for q in load_config(config_path).queues.values()],
    )
    try:
        process.wait_ready(lambda: http_ok(f"{emulator.admin_url}/health", expect=200), deadline=30)
    except BaseException:
        process.stop()
        raise
    return emulator


@pytest.fixture(scope="session")
def servicebus_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceBusEmulator]:
    """A Service Bus emulator process shared by the session (see :class:`ServiceBusEmulator`)."""
    pytest.importorskip("proton", reason="needs the [emulators] extra (python-qpid-proton)")
    log_path = str(tmp_path_factory.mktemp("servicebus") / "emulator.log")
    emulator = start_emulator(log_path)
    try:
        yield emulator
    finally:
        emulator.process.stop()
