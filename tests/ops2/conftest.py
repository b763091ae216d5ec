"""Fixtures shared with tests/ops: loopback HTTP / SMTP sinks, a fake clock, captured logs."""

from tests.ops.conftest import clock, http_sink, log_lines, smtp_sink  # noqa: F401
