"""A chaos worker process: core ``Worker.serve`` on a stack's queue, the engine on a
:class:`~tests.chaos.history.RecordingStore` around the stack's store.

    CW_CHAOS_SPEC='{"kind": "local", ...}' CW_CHAOS_HISTORY=h.db python -m tests.chaos.worker

Environment: ``CW_CHAOS_SKEW`` (seconds added to the engine's clock), ``CW_CHAOS_MARGIN`` (lease
margin, seconds; default 60, the engine's default), ``CW_CHAOS_CRASH`` (``before_claim`` here;
the item points in ``jobs.py``), ``CW_CHAOS_LEDGER_FAULT`` (``unavailable`` / ``unknown``: the
ledger's batch commits fail that way ``CW_CHAOS_FAULT_TIMES`` times, see :func:`ledger_faults`),
``CW_CHAOS_STORE_RETRY`` (the engine's ``store_retry_for``), ``CW_CHAOS_BATCH`` (deliveries per
receive, default 1; ``after_handover`` is a crash point of batches). Stops on SIGTERM. JSON
log lines go to stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

from cronwarden import Engine, EngineSettings, JobSet, Worker
from cronwarden.model.logs import configure
from cronwarden.model.ports import RUN, Create, Op, Store
from cronwarden.model.redaction import register_secret
from cronwarden.testing.faults import UNAVAILABLE, UNKNOWN, Fault, FaultyStore, marks

from . import jobs
from .history import RecordingStore
from .stacks import build


def _ledger_batch(operation: str, ops: list[Op]) -> bool:
    """A ``ctx.items()`` batch commit (it marks items pending)."""
    return marks("pending")(operation, ops)


def ledger_faults(kind: str, times: int) -> list[Fault]:
    """``unavailable``: batch commits refused before applying; ``unknown``: batch commits that
    land but report an error, then ones that do not land and report the same error."""
    if kind == UNAVAILABLE:
        return [Fault(UNAVAILABLE, match=_ledger_batch, times=times)]
    return [
        Fault(UNKNOWN, after=True, match=_ledger_batch, times=times),
        Fault(UNKNOWN, after=False, match=_ledger_batch, times=times),
    ]


def main() -> None:
    configure(stream=sys.stderr)
    register_secret(jobs.SECRET_TOKEN)  # as a secret-manager value would be
    spec: dict[str, Any] = json.loads(os.environ["CW_CHAOS_SPEC"])
    skew = float(os.environ.get("CW_CHAOS_SKEW", "0"))
    margin = float(os.environ.get("CW_CHAOS_MARGIN", "60"))
    inner, queue = build(spec)
    store = RecordingStore(inner, os.environ["CW_CHAOS_HISTORY"], skew=skew)

    def before_commit(ops: list[Op]) -> None:
        if any(isinstance(op, Create) and op.key.kind == RUN for op in ops):
            jobs.crash("before_claim")

    store.before_commit = before_commit
    commit = store.commit

    def commit_then_maybe_crash(ops: Any) -> Any:
        versions = commit(ops)
        # [windows] CW_CHAOS_CRASH=after_dead_letter: die between the dead-letter commit and
        # the broker's dead-letter call
        if any(
            op.key.kind == RUN
            and (getattr(op, "data", None) or {}).get("state") == ("dead_lettered")
            for op in ops
        ):
            jobs.crash("after_dead_letter")
        # CW_CHAOS_CRASH=after_handover: die right after a completion that claimed the next
        # window of the batch (two run records in one commit), before that run starts
        if sum(1 for op in ops if op.key.kind == RUN) == 2:
            jobs.crash("after_handover")
        return versions

    store.commit = commit_then_maybe_crash  # type: ignore[method-assign]
    engine_store: Store = store  # faults outside the recorder: it sees what really landed
    fault = os.environ.get("CW_CHAOS_LEDGER_FAULT")
    if fault:
        times = int(os.environ.get("CW_CHAOS_FAULT_TIMES", "3"))
        engine_store = FaultyStore(store, ledger_faults(fault, times))
    offset = timedelta(seconds=skew)
    settings = EngineSettings(
        lease_margin=timedelta(seconds=margin),
        clock=lambda: datetime.now(UTC) + offset,
        store_retry_for=float(os.environ.get("CW_CHAOS_STORE_RETRY", "30")),
    )
    engine = Engine(JobSet.from_module(jobs), engine_store, settings)
    worker = Worker(engine, queue)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        engine.shutdown()

    signal.signal(signal.SIGTERM, on_signal)
    print(json.dumps({"event": "chaos.worker.ready", "pid": os.getpid()}), file=sys.stderr)
    sys.stderr.flush()
    try:
        worker.serve(stop, wait=0.2, max_messages=int(os.environ.get("CW_CHAOS_BATCH", "1")))
    finally:
        queue.close()
        store.close()


if __name__ == "__main__":
    main()
