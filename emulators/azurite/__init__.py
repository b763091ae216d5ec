"""Azurite, Microsoft's Azure Storage emulator, pinned and installed from npm by cronwarden.

* :func:`ensure_installed` runs ``npm ci`` from the shipped lock file into a cache directory
  (idempotent; ``$CRONWARDEN_AZURITE_DIR`` overrides the location).
* :class:`Azurite` starts the Table service (and optionally Blob) in memory on free loopback
  ports, waits until it answers, resets it, and stops it by process group.
* ``cronwarden emulators azurite`` does the same from a shell; the pytest plugin
  ``cronwarden.emulators.azurite.pytest_plugin`` provides a session-scoped ``azurite`` fixture.

Importing this package imports neither node nor the Azure SDK.
"""

from __future__ import annotations

from .install import (
    AzuriteInstallError,
    cache_root,
    ensure_installed,
    install_dir,
    is_installed,
    missing_tools,
    pinned_version,
)
from .launcher import ACCOUNT_KEY, ACCOUNT_NAME, Azurite

__all__ = [
    "ACCOUNT_KEY",
    "ACCOUNT_NAME",
    "Azurite",
    "AzuriteInstallError",
    "cache_root",
    "ensure_installed",
    "install_dir",
    "is_installed",
    "missing_tools",
    "pinned_version",
]
