"""The fan-out job of tests/support/jobs.py alone, for the GCP pull-worker SIGKILL test (a worker
serving only this job leases deliveries for this job's short max runtime)."""

from tests.support.jobs import fanout

__all__ = ["fanout"]
