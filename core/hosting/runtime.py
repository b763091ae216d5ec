"""Running jobs in one process: a scheduler that plays the cloud scheduler, and worker threads.

This is the embedded local provider's host, and the schedule driver tests use to play Cloud
Scheduler or the Azure timer against emulators (give it that provider's trigger and workers).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime
from types import FrameType

from ..jobs.definitions import JobSet
from ..model.logs import get_logger
from ..model.ports import Provider
from ..model.schedule import utc
from ..run.engine import Engine, EngineSettings
from ..watch.notify import Notifier
from ..watch.watcher import Watcher
from .root import Composition
from .settings import HostSettings
from .trigger import Trigger, Worker

log = get_logger("runtime")
Clock = Callable[[], datetime]


class Scheduler(threading.Thread):
    """Fires each job's windows as they come due, through ``tick(job_name, fire_time)``.

    After a gap (the process was suspended, the clock jumped) only the latest due window is
    fired; the job's catch-up policy decides about the ones in between, as on the clouds.
    """

    def __init__(
        self,
        jobs: JobSet,
        tick: Callable[[str, datetime], object],
        stop: threading.Event,
        *,
        clock: Clock | None = None,
        max_sleep: float = 1.0,
    ) -> None:
        super().__init__(name="cronwarden-scheduler", daemon=True)
        self.jobs = jobs
        self.tick = tick
        self.stop_event = stop
        self.clock = clock or (lambda: datetime.now(UTC))
        self.max_sleep = max_sleep
        now = self.clock()
        # a dependent job (after=) is fired by its upstreams' completions, never by time
        self.next_fire = {job.name: job.schedule.next_after(now) for job in jobs if job.timed}

    def run(self) -> None:
        while not self.stop_event.is_set():
            now = utc(self.clock())
            for name, when in sorted(self.next_fire.items(), key=lambda kv: kv[1]):
                if when <= now:
                    schedule = self.jobs[name].schedule
                    try:
                        self.tick(name, schedule.floor(now))
                    except Exception as exc:
                        log.error(
                            "scheduler tick for %s failed: %s",
                            name,
                            exc,
                            extra={"event": "scheduler.error", "job": name},
                        )
                    self.next_fire[name] = schedule.next_after(now)
            if not self.next_fire:  # only dependent jobs and consumers: nothing to fire
                self.stop_event.wait(self.max_sleep)
                continue
            wait = (min(self.next_fire.values()) - utc(self.clock())).total_seconds()
            self.stop_event.wait(max(0.05, min(self.max_sleep, wait)))


class LocalRunner:
    """Scheduler + worker pool + (optionally) the watcher, in one process."""

    def __init__(
        self,
        jobs: JobSet,
        provider: Provider,
        *,
        workers: int = 2,
        settings: EngineSettings | None = None,
        notifiers: list[Notifier] | None = None,
        host: HostSettings | None = None,
    ) -> None:
        self.jobs = jobs
        self.provider = provider
        #: the object graph every host builds the same way (notifiers from the host settings)
        self.root = Composition(
            jobs, provider=provider, settings=settings, notifiers=notifiers, host=host
        )
        self.store = self.root.store
        self.queue = self.root.queue
        self.engine: Engine = self.root.engine
        self.trigger: Trigger = self.root.trigger
        self.workers: list[Worker] = [self.root.pull_worker() for _ in range(max(1, workers))]
        self.stop_event = threading.Event()
        #: seconds :meth:`serve` waits for running handlers after :meth:`stop`
        self.grace = 30.0
        # Built now, so the first windows it waits for are those after the runner was made.
        self.scheduler = Scheduler(
            jobs,
            lambda n, w: self.trigger.tick(n, w),
            self.stop_event,
            clock=self.engine.settings.clock,
        )

    def fire_due(self, now: datetime | None = None) -> int:
        """Enqueue the latest due window of every job (plus catch-up). Returns requests made."""
        when = now or self.engine.now()
        return sum(len(self.trigger.tick(job.name, when)) for job in self.jobs if job.timed)

    def drain(
        self,
        *,
        idle: float = 0.5,
        outcomes: MutableMapping[str, str] | None = None,
        left: MutableMapping[str, set[str]] | None = None,
        reasons: MutableMapping[str, str] | None = None,
    ) -> int:
        """Work the queue with one worker until nothing arrives for ``idle`` seconds, or until
        :meth:`stop`. ``outcomes`` collects run key → the last outcome kind seen (``error`` when
        the delivery could not be processed). Returns how many deliveries were handled.

        A message of a job or consumer these jobs do not declare (another module's, sharing
        the queue) is left as received, not handled: it comes back after its visibility
        timeout for a worker that declares it (a worker would dead-letter it as unknown).
        ``left`` collects their ids by job name; ``reasons`` run key → why its last outcome
        was what it was (``waits on hourly (not run)``), where the engine said."""
        worker = self.workers[0]
        handled = 0
        while not self.stop_event.is_set():
            received = worker.queue.receive(10, visibility=worker.visibility, wait=idle)
            if not received:
                return handled
            deliveries = []
            for delivery in received:
                name = self.jobs.undeclared(delivery.attributes)
                if name is None:
                    deliveries.append(delivery)
                elif left is not None:
                    left.setdefault(name, set()).add(delivery.message_id)
            promised = False  #: the previous handle was told this delivery comes next
            for i, delivery in enumerate(deliveries):
                if self.stop_event.is_set() and not promised:
                    worker.queue.retry(delivery, 0.0)  # stopping: give it back
                    continue
                following = deliveries[i + 1] if i + 1 < len(deliveries) else None
                promised = following is not None and not self.stop_event.is_set()
                try:
                    outcome = worker.handle(delivery, then=following if promised else None)
                except BaseException:
                    worker.release(following if promised else None)  # the batch broke off
                    raise
                handled += 1
                if outcomes is not None:
                    key = outcome.run_key if outcome else delivery.attributes.get("run_key", "?")
                    outcomes[key] = outcome.kind.value if outcome else "error"
                if reasons is not None and outcome is not None and outcome.reason:
                    reasons[outcome.run_key] = outcome.detail or outcome.reason
        return handled

    def serve(self, *, watch_every: float | None = 60.0) -> None:
        """Run until :meth:`stop` (or Ctrl-C): scheduler, workers and the watcher."""
        threads: list[threading.Thread] = [self.scheduler]
        threads += [
            threading.Thread(
                target=w.serve, args=(self.stop_event,), daemon=True, name=f"cronwarden-worker-{i}"
            )
            for i, w in enumerate(self.workers)
        ]
        if watch_every:
            watcher = self.watcher
            threads.append(
                threading.Thread(
                    target=self._watch,
                    args=(watcher, watch_every),
                    daemon=True,
                    name="cronwarden-watcher",
                )
            )
        for thread in threads:
            thread.start()
        log.info(
            "serving %d job(s) with %d worker(s); Ctrl-C or SIGTERM stops gracefully",
            len(self.jobs),
            len(self.workers),
            extra={"event": "runtime.serving", "jobs": [job.name for job in self.jobs]},
        )
        try:
            while not self.stop_event.wait(0.5):
                pass
        except KeyboardInterrupt:
            log.info("stopping", extra={"event": "runtime.stopping"})
        finally:
            self.stop()
            deadline = time.monotonic() + self.grace
            for thread in threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))

    @property
    def watcher(self) -> Watcher:
        """The watcher :meth:`serve` runs (and ``run --once`` checks), with the channels,
        routing and hooks every host gets from :class:`Composition`."""
        return self.root.watcher

    def _watch(self, watcher: Watcher, every: float) -> None:
        while not self.stop_event.wait(every):
            try:
                watcher.check()
            except Exception as exc:
                log.error("watcher failed: %s", exc, extra={"event": "watcher.error"})

    def stop(self) -> None:
        self.stop_event.set()
        self.engine.shutdown()

    def close(self) -> None:
        """Send the pending job pings and close the provider (:meth:`Composition.close`)."""
        self.root.close()


class GracefulStop:
    """SIGINT / SIGTERM handling for a process that runs handlers (``cronwarden run``, ``trigger``,
    ``backfill --wait``).

    On the first signal: stop claiming (the runner's stop event), ask running handlers to stop
    (``ctx`` raises :class:`~cronwarden.model.errors.Cancelled` at their next call; the engine
    records
    the attempt as interrupted and the delivery is retried), and give them ``grace`` seconds.
    A handler still running after that (or at a second signal) is left: its run keys are logged
    with why, and the process exits at once with ``128 + signal`` (130 / 143); its lease runs out
    and another worker takes the run over. :meth:`finish` logs the stop and returns that status.
    """

    def __init__(self, runner: LocalRunner, *, grace: float = 30.0) -> None:
        self.runner = runner
        self.grace = grace
        self.signum: int | None = None
        self._timer: threading.Timer | None = None
        self._guard = threading.Lock()  # never taken by the signal handler itself
        self._finished = False

    def install(self) -> GracefulStop:
        """Take SIGINT and SIGTERM (main thread only)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        self.runner.grace = self.grace
        return self

    @property
    def exit_code(self) -> int | None:
        return None if self.signum is None else 128 + self.signum

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # Python runs this handler in the main thread between two bytecodes: that thread may hold
        # a non-reentrant lock (the engine's set of running leases, a lease's guard) at that very
        # moment. Taking any lock here would deadlock the stop, so the work happens in a thread.
        name = signal.Signals(signum).name
        if self.signum is not None:
            why = f"a second {name} arrived"
            threading.Thread(target=self._abandon, args=(why,), daemon=True).start()
            return
        self.signum = signum
        threading.Thread(
            target=self._begin_stop, args=(name,), daemon=True, name="cronwarden-stop"
        ).start()

    def _begin_stop(self, name: str) -> None:
        running = self.runner.engine.running()
        log.warning(
            "%s: stopping: no new runs are claimed; %d running handler(s) asked to stop "
            "(Cancelled at their next ctx call); waiting up to %.0fs",
            name,
            len(running),
            self.grace,
            extra={"event": "runtime.stopping", "signal": name, "running": running},
        )
        timer = threading.Timer(
            self.grace, self._abandon, args=(f"the {self.grace:.0f}s grace period ran out",)
        )
        timer.daemon = True
        with self._guard:
            if self._finished:
                return
            self._timer = timer
            timer.start()
        self.runner.stop()

    def _abandon(self, why: str) -> None:
        try:
            self._log_abandoned(why)
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(self.exit_code or 1)

    def _log_abandoned(self, why: str) -> None:
        left = self.runner.engine.running()
        log.error(
            "stopped: %s with %d run(s) still running: %s; their leases run out and another "
            "worker takes them over (the handler did not call ctx in time)",
            why,
            len(left),
            ", ".join(left) or "none",
            extra={"event": "runtime.abandoned", "left": left},
        )

    def finish(self) -> int | None:
        """After the command's work returned: log the stop; the exit status, or None when no
        signal came."""
        with self._guard:
            self._finished = True
            if self._timer is not None:
                self._timer.cancel()
        if self.signum is None:
            return None
        log.info(
            "stopped on %s; no run left running",
            signal.Signals(self.signum).name,
            extra={"event": "runtime.stopped", "left": []},
        )
        return self.exit_code
