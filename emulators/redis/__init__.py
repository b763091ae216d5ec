"""A throwaway ``redis-server`` (Debian's package) and a three-node Redis Cluster for tests: free
loopback ports, files in a temporary directory, stopped by process id. See
:class:`RedisServer` and :class:`RedisCluster`."""

from __future__ import annotations

from .launcher import RedisCluster, RedisServer, missing_reason

__all__ = ["RedisCluster", "RedisServer", "missing_reason"]
