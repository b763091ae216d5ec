"""cronwarden's own Azure Service Bus emulator: an AMQP 1.0 server the real ``azure-servicebus``
SDK talks to with ``…;UseDevelopmentEmulator=true`` (no Docker, no SQL, state in memory).

Run it with ``cronwarden emulators servicebus`` / ``python -m cronwarden.emulators.servicebus``,
in-process with :class:`EmulatorServer`, or in tests through the ``servicebus_emulator`` fixture
(:mod:`cronwarden.emulators.servicebus.pytest_plugin`). Importing this package imports
python-qpid-proton lazily: only the server modules need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import ConfigError, EmulatorConfig, QueueConfig, default_config, load_config

if TYPE_CHECKING:
    from .server import EmulatorServer, connection_string

__all__ = [
    "ConfigError",
    "EmulatorConfig",
    "EmulatorServer",
    "QueueConfig",
    "connection_string",
    "default_config",
    "load_config",
]


def __getattr__(name: str) -> Any:
    if name in ("EmulatorServer", "connection_string"):
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
