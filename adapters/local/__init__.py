"""The embedded local provider: SQLite store and queue, correct across processes."""

from __future__ import annotations

from .provider import LocalProvider
from .queue import SQLiteQueue
from .store import SQLiteStore

__all__ = ["LocalProvider", "SQLiteQueue", "SQLiteStore"]
