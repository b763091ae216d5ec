"""pytest fixtures for Azurite.

Enable with ``pytest_plugins = ["cronwarden.emulators.azurite.pytest_plugin"]``.

* ``azurite`` (session): one in-memory Azurite for the whole run, installed on first use.
  Skips only where ``node``/``npm`` are absent (the reason says how to install them); an install
  or start failure is an error, never a skip.
* ``azurite_table`` (function): a fresh table name in that Azurite, deleted after the test, so
  tests are isolated without restarting the emulator.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .install import is_installed, missing_tools
from .launcher import Azurite


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    missing = missing_tools()
    if "node" in missing or ("npm" in missing and not is_installed()):
        pytest.skip(
            f"Azurite needs {' and '.join(missing)} on PATH: install Node.js 20+ with npm "
            "(e.g. `apt-get install nodejs npm`), then `cronwarden emulators azurite --install`"
        )
    emulator = Azurite().start()
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture
def azurite_table(azurite: Azurite) -> Iterator[str]:
    name = azurite.new_table()
    try:
        yield name
    finally:
        azurite.drop_table(name)
