"""Local AWS: a moto server on 127.0.0.1 (``moto[server]``), a schedule driver that plays
EventBridge Scheduler, and an SQS event-source host that plays Lambda's event source mapping."""

from __future__ import annotations

from .launcher import MotoServer

__all__ = ["MotoServer"]
