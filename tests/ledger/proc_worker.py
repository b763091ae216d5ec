"""One attempt of a ledger case in its own OS process, on a shared SQLite state file::

    python -m tests.ledger.proc_worker --db state.db --effects fx.jsonl --case fan \\
        [--fault unavailable|unknown-after|unknown-before] [--on batch|renewal] [--quarantine]

Side effects are appended to ``--effects`` (one JSON line per item, ``O_APPEND``); the outcome
is printed as one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from datetime import timedelta

import cronwarden
from cronwarden import RunContext, RunRequest, Uncertain
from cronwarden.adapters.local import SQLiteStore
from cronwarden.jobs import JobSet
from cronwarden.model.ports import RUN, Op
from cronwarden.run.engine import Engine, EngineSettings
from cronwarden.testing.faults import UNAVAILABLE, UNKNOWN, Fault, FaultyStore, marks
from tests.support.harness import at

W = at("2026-01-20T02:00Z")


def effect(path: str, ctx: RunContext, key: str, uncertain: bool) -> None:
    line = json.dumps({"key": key, "run_id": ctx.run_id, "uncertain": uncertain}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def batch(operation: str, ops: Sequence[Op]) -> bool:
    return marks("done")(operation, ops) and marks("pending")(operation, ops)


def renewal(operation: str, ops: Sequence[Op]) -> bool:
    return operation == "commit" and len(ops) == 2 and ops[0].key.kind == RUN


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--effects", required=True)
    parser.add_argument("--case", choices=["fan", "loops", "renew"], required=True)
    parser.add_argument("--fault", choices=["unavailable", "unknown-after", "unknown-before"])
    parser.add_argument("--on", choices=["batch", "renewal"], default="batch")
    parser.add_argument("--times", type=int, default=1)
    parser.add_argument("--retry", type=float, default=30.0)
    parser.add_argument("--raise-at", default="")
    parser.add_argument("--quarantine", action="store_true")
    args = parser.parse_args()
    path = args.effects

    def fan(ctx: RunContext) -> None:
        for item in ctx.items([f"i{n}" for n in range(10)]):
            effect(path, ctx, item.key, item.uncertain)

    def loops(ctx: RunContext) -> None:
        for item in ctx.items([f"a{n}" for n in range(10)]):
            effect(path, ctx, item.key, item.uncertain)
            if item.key == "a2" and args.raise_at:
                break
        for item in ctx.items([f"b{n}" for n in range(10)]):
            if item.key == args.raise_at:
                raise RuntimeError(f"boom at {item.key}")
            effect(path, ctx, item.key, item.uncertain)

    def renew(ctx: RunContext) -> None:
        lease = ctx._lease
        for _ in range(1000):  # bounded: up to ~20 s of 20 ms naps
            if lease.renewals >= 2:
                break
            ctx.sleep(0.02)
        effect(path, ctx, f"renewals={lease.renewals}", False)

    handler = {"fan": fan, "loops": loops, "renew": renew}[args.case]
    runtime = "1s" if args.case == "renew" else "5m"
    job = cronwarden.job("fan", cron="0 * * * *", max_runtime=runtime)(handler)
    plan = []
    if args.fault:
        outcome = UNAVAILABLE if args.fault == "unavailable" else UNKNOWN
        match = renewal if args.on == "renewal" else batch
        plan = [Fault(outcome, after=args.fault == "unknown-after", match=match, times=args.times)]
    store = FaultyStore(SQLiteStore(args.db), plan)
    settings = EngineSettings(
        batch_size=5,
        store_retry_for=args.retry,
        uncertain=Uncertain.QUARANTINE if args.quarantine else Uncertain.REDO,
    )
    if args.case == "renew":
        settings.lease_margin = timedelta(seconds=1)
        settings.renew_fraction = 0.1
    engine = Engine(JobSet([job]), store, settings)
    try:
        result = engine.execute(RunRequest("fan", W))
    finally:
        store.close()
    print(
        json.dumps(
            {
                "kind": result.kind.value,
                "reason": result.reason,
                "detail": result.detail,
                "injected": len(store.injected),
            }
        )
    )


if __name__ == "__main__":
    main()
