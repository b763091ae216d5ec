"""The fan-out job of tests/support/jobs.py alone, for the AWS SIGKILL test."""

from tests.support.jobs import fanout

__all__ = ["fanout"]
