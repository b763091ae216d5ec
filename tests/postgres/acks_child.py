"""A worker host that runs one window, acks it (the ack stays buffered) and then waits to be
killed: ``python -m tests.postgres.acks_child DSN SCHEMA EFFECTS_FILE``. Prints ``acked``
once the ack is buffered. Used by ``test_acks``: a crash before the flush."""

from __future__ import annotations

import sys

import cronwarden
from cronwarden import Engine, JobSet, RunContext, Worker
from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore

VISIBILITY = 1.0  #: short, so that the test sees the redelivery soon


def jobs(effects: str) -> JobSet:
    def once(ctx: RunContext) -> None:
        with open(effects, "a", encoding="utf-8") as f:
            f.write(ctx.run_key + "\n")

    return JobSet([cronwarden.job("once", cron="0 * * * *", max_runtime="5m")(once)])


def main(dsn: str, schema: str, effects: str) -> None:
    settings = PostgresSettings(dsn=dsn, schema=schema, expire_every=0)
    store = PostgresStore(settings)
    queue = PostgresQueue(settings, ack_flush=3600.0)  # never flushed before the kill
    worker = Worker(Engine(jobs(effects), store), queue)
    worker.visibility = VISIBILITY
    while worker.poll(wait=5.0) == 0:
        pass
    print("acked", flush=True)
    sys.stdin.readline()  # blocks until the test kills the process


if __name__ == "__main__":
    main(*sys.argv[1:4])
