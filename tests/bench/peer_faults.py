"""One worker process of a fault run (the child of :func:`tests.bench.peers.faults`):
``python -m tests.bench.peer_faults SYSTEM DSN ROLE MARKS``.

One slow job (it holds for :data:`HOLD` seconds) of one window. ``ROLE`` ``first`` fires it
and works; ``second`` only works (the process that starts after the first one was SIGKILLed or
SIGSTOPped). The handler appends ``start <pid> <time>`` and ``end <pid> <time>`` to ``MARKS``;
the process works until an ``end`` line is there or :data:`DEADLINE` passes. Each system gets
its own short failure detection so that a run fits in seconds: cronwarden a 4 s max runtime and
a 2 s lease margin, PgQueuer a 3 s heartbeat timeout; DBOS recovers a dead process's workflows
when a process of the same executor launches; procrastinate has no detection of its own (a job
in ``doing`` stays there until a stalled-jobs task retries it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from datetime import UTC, datetime, timedelta

HOLD = 2.0
DEADLINE = 30.0


def _mark(path: str, what: str) -> None:
    with open(path, "a") as handle:
        handle.write(f"{what} {os.getpid()} {time.time():.3f}\n")


def _ended(path: str) -> bool:
    try:
        with open(path) as handle:
            return any(line.startswith("end ") for line in handle)
    except OSError:
        return False


def _finished(path: str) -> bool:
    """Every run that started has its outcome recorded (cronwarden's marks only)."""
    with open(path) as handle:
        lines = [line.split()[0] for line in handle if line.strip()]
    return lines.count("start") <= sum(1 for what in lines if what.startswith("outcome-"))


def _cronwarden(dsn: str, role: str, marks: str) -> None:
    import cronwarden
    from cronwarden import Engine, JobSet, RunContext, Trigger, Worker
    from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore
    from cronwarden.run.engine import EngineSettings

    def slow(ctx: RunContext) -> None:
        _mark(marks, "start")
        time.sleep(HOLD)
        _mark(marks, "end")

    jobs = JobSet([cronwarden.job("slow", cron="0 0 * * *", max_runtime="4s")(slow)])
    settings = PostgresSettings(dsn=dsn, schema="cw", expire_every=0)
    store = PostgresStore(settings)
    queue = PostgresQueue(settings, database=store.db)
    engine = Engine(jobs, store, settings=EngineSettings(lease_margin=timedelta(seconds=2)))
    worker = Worker(engine, queue)
    if role == "first":
        day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        Trigger(jobs, queue).tick("slow", day)
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        for delivery in queue.receive(1, visibility=worker.visibility, wait=0.5):
            outcome = worker.handle(delivery)
            if outcome is not None:  # succeeded, or refused: a stale owner's result
                _mark(marks, f"outcome-{outcome.kind.value}")
        if _ended(marks) and _finished(marks):
            break
    queue.close()
    store.close()


def _dbos(dsn: str, role: str, marks: str) -> None:
    from dbos import DBOS, DBOSConfig, SetWorkflowID

    config: DBOSConfig = {"name": "peerfaults", "system_database_url": dsn, "log_level": "WARNING"}
    DBOS(config=config)

    @DBOS.step()
    def hold() -> None:
        _mark(marks, "start")
        time.sleep(HOLD)
        _mark(marks, "end")

    @DBOS.workflow()
    def slow() -> None:
        hold()

    DBOS.launch()  # recovers the pending workflows of this executor ("local")
    if role == "first":
        with SetWorkflowID("slow:window"):
            DBOS.start_workflow(slow)
    end = time.monotonic() + DEADLINE
    while not _ended(marks) and time.monotonic() < end:
        time.sleep(0.1)
    DBOS.destroy()


def _pgqueuer(dsn: str, role: str, marks: str) -> None:
    import psycopg
    from pgqueuer import Job, QueueManager
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    async def main() -> None:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        queries = Queries(PsycopgDriver(conn))
        if role == "first":
            await queries.install()
            await queries.enqueue("slow", b"window", dedupe_key="slow:window")
        qm = QueueManager(Queries(PsycopgDriver(conn)))

        @qm.entrypoint("slow")
        async def slow(job: Job) -> None:
            _mark(marks, "start")
            await asyncio.sleep(HOLD)
            _mark(marks, "end")

        async def stop() -> None:
            end = time.monotonic() + DEADLINE
            while not _ended(marks) and time.monotonic() < end:
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # its completion is buffered
            qm.shutdown.set()

        watcher = asyncio.create_task(stop())
        await qm.run(
            dequeue_timeout=timedelta(milliseconds=200), heartbeat_timeout=timedelta(seconds=3)
        )
        await watcher

    asyncio.run(main())


def _procrastinate(dsn: str, role: str, marks: str) -> None:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="slow")
    async def slow() -> None:
        _mark(marks, "start")
        await asyncio.sleep(HOLD)
        _mark(marks, "end")

    async def main() -> None:
        async with app.open_async():
            if role == "first":
                await app.schema_manager.apply_schema_async()
                await slow.configure(queueing_lock="slow:window").defer_async()
            worker = asyncio.create_task(
                app.run_worker_async(wait=True, install_signal_handlers=False)
            )
            end = time.monotonic() + DEADLINE
            while not _ended(marks) and time.monotonic() < end:
                await asyncio.sleep(0.1)
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await worker

    asyncio.run(main())


RUNNERS = {
    "cronwarden-queue": _cronwarden,
    "dbos": _dbos,
    "pgqueuer": _pgqueuer,
    "procrastinate": _procrastinate,
}


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    system, dsn, role, marks = sys.argv[1:5]
    RUNNERS[system](dsn, role, marks)
