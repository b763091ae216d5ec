"""In-process harness: jobs + engine + worker on the local provider, with a controllable clock."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronwarden import Engine, EngineSettings, Job, JobSet, Trigger, Worker
from cronwarden.adapters.local import SQLiteQueue, SQLiteStore


class FakeClock:
    """A settable clock; thread-safe."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | float) -> None:
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        with self._lock:
            self._now += step

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when


@dataclass
class Harness:
    jobs: JobSet
    store: SQLiteStore
    queue: SQLiteQueue
    engine: Engine
    trigger: Trigger
    worker: Worker
    closed: list[object] = field(default_factory=list)

    def close(self) -> None:
        self.store.close()
        self.queue.close()


def harness(
    tmp_path: Path,
    jobs: Iterable[Job],
    *,
    clock: object = None,
    max_deliveries: int = 10,
    **settings: object,
) -> Harness:
    jobset = JobSet(jobs)
    store = SQLiteStore(str(tmp_path / "state.db"))
    queue = SQLiteQueue(str(tmp_path / "queue.db"), max_deliveries=max_deliveries)
    engine_settings = EngineSettings(**settings)  # type: ignore[arg-type]
    if clock is not None:
        engine_settings.clock = clock  # type: ignore[assignment]
    engine = Engine(jobset, store, engine_settings)
    return Harness(
        jobset, store, queue, engine, Trigger(jobset, queue, store), Worker(engine, queue)
    )


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
