"""One process of the consumer storm (``test_storm.py``): wait for the start file, publish this
process's copies of the event without broker deduplication (as Pub/Sub would deliver them),
then work the shared queue until no message of the run key is left; write the outcomes seen.

    python -m tests.events.storm DIRECTORY INDEX COPIES
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import cronwarden
from cronwarden import Engine, EngineSettings, JobSet, RunContext, Worker
from cronwarden.adapters.local import SQLiteQueue, SQLiteStore
from cronwarden.model.ports import Publisher

EVENT = {"invoice_id": "inv-storm", "amount": 42}
RUN_KEY = "invoice-render:e:inv-storm"


class NoDedup(Publisher):
    """The shared queue without its deduplication: every copy is a delivery."""

    def __init__(self, queue: SQLiteQueue) -> None:
        self.queue = queue

    def publish(self, body: bytes, *, dedup_id: str | None = None, **kw: Any) -> None:
        self.queue.publish(body, **kw)


def main(directory: str, index: int, copies: int) -> None:
    root = Path(directory)
    runs = root / "runs.log"

    def render(ctx: RunContext) -> None:
        with open(runs, "a") as out:  # O_APPEND: one line per handler run, any process
            out.write(f"{os.getpid()} {ctx.run_key} {ctx.payload['amount']}\n")

    declared = cronwarden.consumer("invoice-render", key="invoice_id", max_runtime="1s")(render)
    store = SQLiteStore(str(root / "state.db"))
    queue = SQLiteQueue(str(root / "queue.db"), max_deliveries=20)
    engine = Engine(
        JobSet([], [declared]), store, EngineSettings(lease_margin=timedelta(seconds=1))
    )
    worker = Worker(engine, queue)
    (root / f"ready.{index}").touch()
    deadline = time.monotonic() + 60
    while not (root / "go").exists():  # the start barrier: every process publishes at once
        if time.monotonic() > deadline:
            sys.exit("no start signal")
        time.sleep(0.01)
    for _ in range(copies):
        cronwarden.publish(declared, EVENT, publisher=NoDedup(queue))
    seen: Counter[str] = Counter()
    while time.monotonic() < deadline:
        deliveries = queue.receive(5, visibility=worker.visibility, wait=0.2)
        for delivery in deliveries:
            outcome = worker.handle(delivery)
            seen[outcome.kind.value if outcome else "error"] += 1
        if not deliveries and not queue.holds(RUN_KEY):
            break
    (root / f"outcomes.{index}.json").write_text(json.dumps(seen))
    store.close()
    queue.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
