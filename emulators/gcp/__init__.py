"""Launchers for the official Google Cloud emulators (Pub/Sub, Firestore), for tests and dev.

``cronwarden emulators pubsub|firestore`` runs one from the command line; the pytest plugin
:mod:`cronwarden.emulators.gcp.pytest_plugin` provides session-scoped fixtures.
"""

from __future__ import annotations

from ._sdk import INSTALL_HINT, emulator_launcher, missing_reason, sdk_root
from .emulator import EmulatorMissing, FirestoreEmulator, GcpEmulator, PubSubEmulator
from .scheduler import CloudSchedulerDriver, tick_message

__all__ = [
    "INSTALL_HINT",
    "CloudSchedulerDriver",
    "EmulatorMissing",
    "FirestoreEmulator",
    "GcpEmulator",
    "PubSubEmulator",
    "emulator_launcher",
    "missing_reason",
    "sdk_root",
    "tick_message",
]
