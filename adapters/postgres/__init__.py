"""The Postgres provider: a store and a queue in one PostgreSQL database (psycopg 3 with a
connection pool), so any number of hosts can share the work. ``pip install
'cronwarden[postgres]'``; select with ``--provider postgres`` and a DSN in
``$CRONWARDEN_POSTGRES_DSN`` or ``--dsn``.

Importing this package imports no driver: psycopg loads when the first pool is built.
"""

from __future__ import annotations

from .provider import PostgresProvider
from .queue import PostgresQueue
from .settings import PostgresSettings
from .store import PostgresStore

__all__ = ["PostgresProvider", "PostgresQueue", "PostgresSettings", "PostgresStore"]
