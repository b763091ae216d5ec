"""``python -m cronwarden.emulators.postgres``: same as ``cronwarden emulators postgres``."""

from __future__ import annotations

from .cli import postgres

if __name__ == "__main__":
    postgres()
