"""Shared fixtures. Emulator fixtures come from plugins shipped in ``cronwarden.emulators``."""

from __future__ import annotations

pytest_plugins: list[str] = [
    "cronwarden.emulators.azurite.pytest_plugin",
    "cronwarden.emulators.gcp.pytest_plugin",
    "cronwarden.emulators.postgres.pytest_plugin",
    "cronwarden.emulators.redis.pytest_plugin",
    "cronwarden.emulators.servicebus.pytest_plugin",
    "cronwarden.emulators.aws.pytest_plugin",
]
