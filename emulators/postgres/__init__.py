"""A throwaway PostgreSQL server for tests and development: ``initdb`` + ``pg_ctl`` in a temporary
directory on a free loopback port, run as the ``postgres`` user when we are root (``initdb``
refuses root), stopped by its process id. See :class:`PostgresServer`."""

from __future__ import annotations

from .launcher import PostgresServer, find_bindir, missing_reason

__all__ = ["PostgresServer", "find_bindir", "missing_reason"]
