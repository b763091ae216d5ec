"""One measured run of one system, in a fresh process on a fresh database (the child of
:mod:`tests.bench.peers`): ``python -m tests.bench.peer_runs SYSTEM DSN RUNS``.

Every system runs the same trivial job ``RUNS`` times, one run per window (a distinct id), and
prints one JSON line: ``{"system", "runs", "seconds", "done"}``. Set-up (schema, tables,
launch) happens before ``ready`` is printed; the parent resets the database's statement
counters then (it waits for the line on stdin's echo) and reads them when the child exits,
so statements per run count the measured part only, background pollers included.

The peers are benchmark-only dependencies (``nox -s peers`` installs them): DBOS workflows
started by id, PgQueuer jobs (enqueued, then drained by a worker), procrastinate jobs deferred
with a queueing lock per window (what its periodic deferrer does: one job per window).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

#: jobs PgQueuer takes per dequeue: 100, its best here (its default, 10, halves its rate)
BATCH = int(os.environ.get("CW_PEERS_PGQUEUER_BATCH", "100"))
#: 2: every window is fired again once its first run is over (a late double fire: a scheduler
#: retry, a redelivery); ``done`` then counts how many runs the second fires made
FIRES = int(os.environ.get("CW_PEERS_FIRES", "1"))
SYSTEMS = ("cronwarden-queue", "cronwarden-engine", "dbos", "pgqueuer", "procrastinate")
#: measured only when named (``--only``): cronwarden through the queue with every ack sent on
#: its own (``ack_flush=0``: the queue's ack path before acks rode on the next receive)
#: ``-thread``: the lease renewed by a thread started and joined per run (the keeper before
#: the process-wide renewal scheduler), for before/after in one interleaved run
#: ``-batch100``: the worker receives up to 100 deliveries per poll (PgQueuer's batch here)
#: instead of the 10 of ``cronwarden-queue`` (the headline: a worker's usual poll)
EXTRA_SYSTEMS = (
    "cronwarden-queue-unbuffered",
    "cronwarden-engine-thread",
    "cronwarden-queue-thread",
    "cronwarden-queue-batch100",
)
#: deliveries cronwarden's worker takes per poll (``cronwarden-queue``)
POLL_BATCH = 10


def _thread_per_run() -> None:
    """Make the engine renew each run's lease on a thread of its own, as before the renewal
    scheduler: the same renewal step, driven by a thread started and joined per run."""
    import threading

    from cronwarden.run import engine
    from cronwarden.run.lease import LeaseKeeper

    class ThreadKeeper(LeaseKeeper):
        def start(self) -> None:
            self._halt_event = threading.Event()
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

        def _loop(self) -> None:
            while not self._halt_event.wait(self._next_wait()):
                if self._step() is None:
                    return

        def stop(self) -> None:
            self._halt_event.set()
            self.lease.quit_retrying.set()
            self._thread.join()
            self.lease.quit_retrying.clear()

    engine.LeaseKeeper = ThreadKeeper  # type: ignore[misc]


def _work() -> int:
    """The job itself: the same trivial work for every system."""
    return sum(i * i for i in range(50))


def _ready() -> None:
    """Tell the parent set-up is over, and wait for it to reset the statement counters."""
    print("ready", flush=True)
    sys.stdin.readline()


def _windows(runs: int) -> list[datetime]:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return [now - timedelta(minutes=runs - i) for i in range(runs)]


def _cronwarden(
    dsn: str, runs: int, *, queue: bool, ack_flush: float | None = None, batch: int = POLL_BATCH
) -> tuple[float, int]:
    import cronwarden
    from cronwarden import Engine, JobSet, OutcomeKind, RunContext, RunRequest, Trigger, Worker
    from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore
    from cronwarden.model.ports import STATUS, Key

    done = {"n": 0}

    def trivial(ctx: RunContext) -> None:
        _work()
        done["n"] += 1

    jobs = JobSet([cronwarden.job("bench", cron="* * * * *", max_runtime="5m")(trivial)])
    settings = PostgresSettings(dsn=dsn, schema="cw", expire_every=0)
    store = PostgresStore(settings)
    q = (
        PostgresQueue(settings, database=store.db)
        if ack_flush is None
        else PostgresQueue(settings, database=store.db, ack_flush=ack_flush)
    )
    engine = Engine(jobs, store)
    store.get(Key(STATUS, "bench"))  # first use migrates the schema: set-up, not a run
    q.depth()
    windows = _windows(runs)
    _ready()
    started = time.perf_counter()
    if queue:
        trigger, worker = Trigger(jobs, q), Worker(engine, q)
        for window in windows:
            trigger.tick("bench", window)
        while done["n"] < runs:
            if worker.poll(max_messages=batch, wait=1.0) == 0 and done["n"] < runs:
                raise RuntimeError(f"queue empty after {done['n']} of {runs} runs")
        for _ in range(FIRES - 1):
            for window in windows:
                trigger.tick("bench", window)
            while worker.poll(max_messages=batch, wait=0.5):
                pass
    else:
        for fire in range(FIRES):
            for window in windows:
                outcome = engine.execute(RunRequest("bench", window))
                if outcome.kind is not (OutcomeKind.DUPLICATE if fire else OutcomeKind.SUCCEEDED):
                    raise RuntimeError(f"run: {outcome}")
    elapsed = time.perf_counter() - started
    q.close()
    store.close()
    return elapsed, done["n"]


def _dbos(dsn: str, runs: int) -> tuple[float, int]:
    from dbos import DBOS, DBOSConfig, SetWorkflowID

    done = {"n": 0}
    config: DBOSConfig = {
        "name": "peerbench",
        "system_database_url": dsn,
        "log_level": "WARNING",
    }
    DBOS(config=config)

    @DBOS.step()
    def step() -> int:
        return _work()

    @DBOS.workflow()
    def workflow(window: str) -> int:
        result = step()
        done["n"] += 1
        return result

    DBOS.launch()
    windows = [w.isoformat() for w in _windows(runs)]
    _ready()
    started = time.perf_counter()
    for _ in range(FIRES):
        for window in windows:
            with SetWorkflowID(f"bench:{window}"):
                workflow(window)
    elapsed = time.perf_counter() - started
    DBOS.destroy()
    return elapsed, done["n"]


def _pgqueuer(dsn: str, runs: int) -> tuple[float, int]:
    import psycopg
    from pgqueuer import Job, QueueManager
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    async def main() -> tuple[float, int]:
        done = {"n": 0}
        finished: list[float] = []
        setup = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        await Queries(PsycopgDriver(setup)).install()
        producer = Queries(PsycopgDriver(setup))
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        qm = QueueManager(Queries(PsycopgDriver(conn)))

        @qm.entrypoint("bench")
        async def bench(job: Job) -> None:
            _work()
            done["n"] += 1
            if done["n"] >= runs:
                finished.append(time.perf_counter())
                qm.shutdown.set()  # every job ran: stop (its completions are flushed on exit)

        windows = [w.isoformat().encode() for w in _windows(runs)]
        _ready()
        started = time.perf_counter()
        for window in windows:
            await producer.enqueue("bench", window, dedupe_key=window.decode())
        # pre-enqueued jobs raise no further NOTIFY: between batches PgQueuer sleeps up to
        # dequeue_timeout, so it is set short (its best case here)
        await qm.run(dequeue_timeout=timedelta(milliseconds=10), batch_size=BATCH)
        # until the last job ran: its shutdown (seconds of task cancellation) is not a run's
        elapsed = finished[0] - started
        for _ in range(FIRES - 1):
            for window in windows:
                await producer.enqueue("bench", window, dedupe_key=window.decode())
            again = QueueManager(Queries(PsycopgDriver(conn)))
            again.entrypoint("bench")(bench)
            await again.run(
                dequeue_timeout=timedelta(milliseconds=10),
                batch_size=BATCH,
                mode=QueueExecutionMode.drain,
            )
        await conn.close()
        await setup.close()
        return elapsed, done["n"]

    return asyncio.run(main())


def _procrastinate(dsn: str, runs: int) -> tuple[float, int]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    done = {"n": 0}

    @app.task(name="bench")
    def bench(window: str) -> None:
        _work()
        done["n"] += 1

    async def main() -> tuple[float, int]:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            windows = [w.isoformat() for w in _windows(runs)]
            _ready()
            started = time.perf_counter()
            for _ in range(FIRES):
                for window in windows:
                    job = bench.configure(queueing_lock=f"bench:{window}")
                    await job.defer_async(window=window)
                await app.run_worker_async(wait=False, concurrency=1, install_signal_handlers=False)
            return time.perf_counter() - started, done["n"]

    return asyncio.run(main())


RUNNERS: dict[str, Callable[[str, int], tuple[float, int]]] = {
    "cronwarden-queue": lambda dsn, runs: _cronwarden(dsn, runs, queue=True),
    "cronwarden-engine": lambda dsn, runs: _cronwarden(dsn, runs, queue=False),
    "cronwarden-queue-unbuffered": lambda dsn, runs: _cronwarden(
        dsn, runs, queue=True, ack_flush=0.0
    ),
    "cronwarden-engine-thread": lambda dsn, runs: (
        _thread_per_run(),
        _cronwarden(dsn, runs, queue=False),
    )[1],
    "cronwarden-queue-batch100": lambda dsn, runs: _cronwarden(dsn, runs, queue=True, batch=100),
    "cronwarden-queue-thread": lambda dsn, runs: (
        _thread_per_run(),
        _cronwarden(dsn, runs, queue=True),
    )[1],
    "dbos": _dbos,
    "pgqueuer": _pgqueuer,
    "procrastinate": _procrastinate,
}


def main(argv: list[str]) -> None:
    system, dsn, runs = argv[0], argv[1], int(argv[2])
    logging.basicConfig(level=logging.WARNING)  # no system logs per run: same for all
    for noisy in ("dbos", "procrastinate", "pgqueuer", "cronwarden"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    seconds, done = RUNNERS[system](dsn, runs)
    result: dict[str, Any] = {"system": system, "runs": runs, "seconds": seconds, "done": done}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
