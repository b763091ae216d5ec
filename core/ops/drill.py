"""``cronwarden drill JOB``: the two deliberate pre-launch tests, run without touching the
job's real windows, counters or records.

Both run a **shadow job** ``_drill-<job>`` (job names never start with ``_``, so its run,
lock and status records live apart from every real job's) that copies the real job's
schedule, owner, tags, overlap policy and max runtime:

1. *A forced failure reaches every notifier*: one run whose handler raises
   :class:`DrillFailure` with a single attempt is recorded dead-lettered (in the store: the
   queue is not involved); the watcher builds its ``failing`` alert (threshold 1, so the text
   is the real one, owner and both timezones included), marked ``drill``, and it is delivered
   with ``deliver_test`` (raising; PagerDuty triggers then resolves) through every channel the
   real job's owner and tags route to. Fails when a channel fails or none matches.
2. *A forced overlap is refused and logged naming the holder*: run A holds the shadow's lock
   (its handler waits); run B of another window must be refused by the overlap policy
   (skipped / deferred / overlap failure) and a log event must name A's owner and run id.

Every shadow record is deleted afterwards.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..jobs.definitions import Job, JobSet, Liveness, Retry
from ..model.logs import get_logger
from ..model.ports import ITEM, RUN, STATUS, Delete, Store
from ..model.records import LockRecord, lock_key_of, status_key_of
from ..model.redaction import redact
from ..model.runs import RunRequest
from ..run.engine import Engine, EngineSettings, Outcome, OutcomeKind
from ..watch.watcher import Condition, Watcher

if TYPE_CHECKING:
    from ..run.context import RunContext
    from ..watch.alerting.routing import Router

DRILL_PREFIX = "_drill-"
_REFUSED = {OutcomeKind.SKIPPED, OutcomeKind.DEFERRED, OutcomeKind.OVERLAP_FAILED}
_OVERLAP_EVENTS = {"run.skipped", "run.deferred", "run.overlap"}


class DrillFailure(Exception):
    """The forced failure of ``cronwarden drill``."""


@dataclass
class Step:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


@dataclass
class DrillReport:
    job: str
    steps: list[Step] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(s.ok for s in self.steps)


def shadow_of(job: Job, handler: Callable[[RunContext], Any], **changes: Any) -> Job:
    """The drill's copy of ``job`` under the reserved name ``_drill-<job>``."""
    return dataclasses.replace(
        job, name=DRILL_PREFIX + job.name, handler=handler, expect=None, **changes
    )


class _Events(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Drill:
    """Runs the drill of ``job`` against ``store`` and the channels of ``router``."""

    def __init__(
        self,
        job: Job,
        store: Store,
        router: Router,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        hold_timeout: float = 30.0,
    ) -> None:
        self.job = job
        self.store = store
        self.router = router
        self.clock = clock
        self.hold_timeout = hold_timeout
        self.name = DRILL_PREFIX + job.name
        self.log = get_logger("drill")

    def run(self) -> DrillReport:
        report = DrillReport(self.job.name)
        self.log.info(
            "drill of %s started",
            self.job.name,
            extra={"event": "drill.started", "job": self.job.name},
        )
        try:
            self.clean()
            report.steps.append(self.forced_failure())
            self.clean()
            report.steps.append(self.forced_overlap())
        finally:
            self.clean()
            self.log.info(
                "drill of %s finished: %s",
                self.job.name,
                "ok" if report.ok else "FAILED",
                extra={"event": "drill.finished", "job": self.job.name, "ok": report.ok},
            )
        return report

    def _engine(self, shadow: Job) -> Engine:
        return Engine(JobSet([shadow]), self.store, EngineSettings(clock=self.clock))

    def _windows(self) -> tuple[datetime, datetime]:
        current = self.job.schedule.floor(self.clock())
        return current, self.job.schedule.floor(current - timedelta(seconds=1))

    # -- 1 ----------------------------------------------------------------------------------
    def forced_failure(self) -> Step:
        def fail(ctx: RunContext) -> None:
            raise DrillFailure(f"cronwarden drill of {self.job.name}: forced failure")

        shadow = shadow_of(
            self.job,
            fail,
            retry=Retry(max_attempts=1, min_backoff=0, max_backoff=0),
            liveness=Liveness(grace=self.job.liveness.grace, failure_threshold=1),
        )
        window, _ = self._windows()
        outcome = self._engine(shadow).execute(RunRequest(shadow.name, window, reason="manual"))
        if outcome.kind is not OutcomeKind.DEAD_LETTERED:
            return Step("forced failure", False, f"the failing run ended {outcome.kind.value}")
        watcher = Watcher(JobSet([shadow]), self.store, None, notifiers=[], hooks=[])
        health, _ = watcher.evaluate(self.store.query(STATUS), self.clock(), None)
        alert = health[0].conditions.get(Condition.FAILING)
        if alert is None:
            return Step("forced failure", False, "the watcher raised no failing alert")
        alert = dataclasses.replace(
            alert,
            text=f"DRILL (cronwarden drill {self.job.name}; nothing is broken): {alert.text}",
            extra={**alert.extra, "drill": True, "drill_of": self.job.name},
        )
        self.router.log_channel.notify(alert)
        channels = self.router.channels_for(alert)
        if not channels:
            return Step(
                "forced failure",
                False,
                f"no channel routes {self.job.name}'s alerts (owner "
                f"{self.job.owner or 'none'}, tags {', '.join(self.job.tags) or 'none'}): only "
                "the log saw it",
            )
        failed: list[str] = []
        for channel in channels:
            try:
                channel.deliver_test(alert)
            except Exception as exc:
                failed.append(f"{channel.name} ({redact(str(exc))[:200]})")
        names = ", ".join(c.name for c in channels)
        if failed:
            return Step("forced failure", False, "alert not delivered to " + "; ".join(failed))
        return Step("forced failure", True, f"failing alert delivered to {names} (and the log)")

    # -- 2 ----------------------------------------------------------------------------------
    def forced_overlap(self) -> Step:
        release = threading.Event()

        def hold(ctx: RunContext) -> None:
            release.wait(self.hold_timeout)

        shadow = shadow_of(self.job, hold)
        engine = self._engine(shadow)
        first, second = self._windows()
        outcomes: list[Outcome] = []
        holder = threading.Thread(
            target=lambda: outcomes.append(
                engine.execute(RunRequest(shadow.name, first, reason="manual"))
            ),
            name="cronwarden-drill-holder",
            daemon=True,
        )
        events = _Events()
        logger = get_logger()
        logger.addHandler(events)
        previous = logger.level
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        holder.start()
        try:
            lock = self._wait_for_lock(shadow)
            if lock is None:
                return Step("forced overlap", False, "run A never took the lock")
            refused = engine.execute(RunRequest(shadow.name, second, reason="manual"))
        finally:
            release.set()
            holder.join(self.hold_timeout + 30)
            logger.removeHandler(events)
            logger.setLevel(previous)
        named = [
            r
            for r in events.records
            if getattr(r, "event", None) in _OVERLAP_EVENTS
            and getattr(r, "run_key", None) == refused.run_key
            and lock.run_id in str(getattr(r, "lock_owner", ""))
        ]
        if refused.kind not in _REFUSED:
            return Step(
                "forced overlap", False, f"run B was not refused: it ended {refused.kind.value}"
            )
        if not named:
            return Step("forced overlap", False, "no log event named the lock holder")
        a_done = outcomes and outcomes[0].kind is OutcomeKind.SUCCEEDED
        return Step(
            "forced overlap",
            True,
            f"run B {refused.kind.value} ({self.job.overlap.value} policy); "
            f"{getattr(named[0], 'event', '')} named the holder {lock.holder}"
            + ("; run A then succeeded" if a_done else ""),
        )

    def _wait_for_lock(self, shadow: Job) -> LockRecord | None:
        deadline = time.monotonic() + self.hold_timeout
        while time.monotonic() < deadline:
            record = self.store.get(lock_key_of(shadow.name))
            if record is not None:
                return LockRecord.from_data(record.data)
            time.sleep(0.02)  # polling the store with a deadline
        return None

    # -- clean-up ---------------------------------------------------------------------------
    def clean(self) -> None:
        """Delete every record of the shadow job."""
        doomed = [*self.store.query(RUN, self.name), *self.store.query(ITEM, self.name)]
        for key in (lock_key_of(self.name), status_key_of(self.name)):
            record = self.store.get(key)
            if record is not None:
                doomed.append(record)
        for record in doomed:
            self.store.commit([Delete(record.key, record.version)])


__all__ = ["DRILL_PREFIX", "Drill", "DrillFailure", "DrillReport", "Step", "shadow_of"]
