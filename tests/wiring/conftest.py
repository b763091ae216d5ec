"""The loopback HTTP sink (tests/ops) and the real ``cronwarden`` command (tests/cli)."""

from __future__ import annotations

from tests.cli.conftest import cw
from tests.ops.conftest import HttpSink, http_sink

__all__ = ["HttpSink", "cw", "http_sink"]
