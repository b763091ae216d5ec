"""Shared fixtures. Emulator fixtures come from plugins shipped in ``cronwarden.emulators``."""

from __future__ import annotations

import signal
from types import FrameType

import pytest

pytest_plugins: list[str] = [
    "cronwarden.emulators.azurite.pytest_plugin",
    "cronwarden.emulators.gcp.pytest_plugin",
    "cronwarden.emulators.postgres.pytest_plugin",
    "cronwarden.emulators.redis.pytest_plugin",
    "cronwarden.emulators.servicebus.pytest_plugin",
    "cronwarden.emulators.aws.pytest_plugin",
]


def pytest_configure(config: pytest.Config) -> None:
    """A SIGTERM (a cancelled CI job) ends the session the way Ctrl-C does, so the session
    fixtures' finalizers stop the emulators they started: each runs in a process group of its
    own, which a signal to pytest's group never reaches. Left alone when a handler is set."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt_once)


_interrupted: list[int] = []


def _interrupt_once(signum: int, _frame: FrameType | None) -> None:
    # a second SIGTERM must not cut the finalizers short (and SIG_IGN would be inherited by
    # every process a finalizer still starts)
    if not _interrupted:
        _interrupted.append(signum)
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")
