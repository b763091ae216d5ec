"""The fan-out job of tests/support/jobs.py alone, for the Azure SIGKILL test (a host serving
only this job renews and leases for this job's short max runtime)."""

from tests.support.jobs import fanout

__all__ = ["fanout"]
