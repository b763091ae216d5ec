"""One owner of a ledger run in its own OS process, for the durability contract's crash tests::

    python -m tests.ledger.crash_worker --store sqlite:PATH | postgres:DSN#SCHEMA \\
        --effects fx.jsonl --items N [--effect-ms 5] [--flush-every S|none] [--batch-size B]

Each item's side effect first appends one JSON line to ``--effects`` (``O_APPEND``: a line is
whole or absent after a SIGKILL; the side effect counts as happened from there, like a request
sent) and then takes ``--effect-ms``. The line holds the item's key, idempotency key,
``uncertain`` flag and the owner's pid. The run's outcome is printed as one JSON line on stdout.
The lease is short (max runtime 2 s + margin 0.5 s) so that a restart can take a dead owner's
run over within seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import timedelta
from typing import Any

import cronwarden
from cronwarden import RunContext, RunRequest
from cronwarden.jobs import JobSet
from cronwarden.model.ports import Store
from cronwarden.run.engine import Engine, EngineSettings
from tests.support.harness import at

W = at("2026-01-20T02:00Z")
JOB = "crash"


def open_store(spec: str) -> Store:
    """``sqlite:PATH`` or ``postgres:DSN#SCHEMA``."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        from cronwarden.adapters.local import SQLiteStore

        return SQLiteStore(where)
    from cronwarden.adapters.postgres import PostgresSettings, PostgresStore

    dsn, _, schema = where.rpartition("#")
    return PostgresStore(PostgresSettings(dsn=dsn, schema=schema, expire_every=0))


def append(path: str, line: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--effects", required=True)
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--effect-ms", type=float, default=5.0)
    parser.add_argument("--flush-every", default="default")
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()
    options: dict[str, Any] = {}
    if args.flush_every != "default":
        options["flush_every"] = None if args.flush_every == "none" else float(args.flush_every)

    def handler(ctx: RunContext) -> None:
        for item in ctx.items([f"i{n:03d}" for n in range(args.items)], **options):
            append(  # the side effect has happened once it started (a request sent)
                args.effects,
                {
                    "key": item.key,
                    "idempotency_key": item.idempotency_key,
                    "uncertain": item.uncertain,
                    "pid": os.getpid(),
                },
            )
            time.sleep(args.effect_ms / 1000)  # the rest of its duration (the workload)

    job = cronwarden.job(JOB, cron="0 * * * *", max_runtime="2s")(handler)
    settings = EngineSettings(batch_size=args.batch_size, lease_margin=timedelta(seconds=0.5))
    store = open_store(args.store)
    try:
        result = Engine(JobSet([job]), store, settings).execute(RunRequest(JOB, W))
        trips = store.round_trips
    finally:
        store.close()
    outcome = {"kind": result.kind.value, "reason": result.reason, "round_trips": trips}
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
