"""One process-wide scheduler for lease renewals: no thread started per run.

A run's :class:`~cronwarden.run.lease.LeaseKeeper` registers a :class:`Ticket` here. One daemon
thread (started lazily) keeps the tickets in a heap by next-due time and sleeps on a Condition
until the earliest is due; it never touches a store. Each due ticket is handed to a worker
thread that runs the keeper's step (renew, extend visibility, interrupt at max runtime) and
then reschedules or retires the ticket.

Why workers and not the scheduler thread: a renewal can block on a slow or unreachable store
for up to the lease's retry budget. Workers come from a pool that never queues work behind a
busy worker: a due ticket takes an idle worker or starts a new one (daemon threads that exit
after :data:`IDLE_SECONDS` unused). So one lease whose store hangs holds one worker and never
delays another lease's renewal; the pool only grows while renewals are actually blocked, and a
run that ends before its first renewal is due costs a heap push and pop, no thread.

A ticket is either in the heap or running on one worker, never both: renewals of one lease
never overlap, as with the per-run thread this replaces.
"""

from __future__ import annotations

import heapq
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..model.logs import get_logger

#: seconds an idle worker waits for work before it exits
IDLE_SECONDS = 30.0

_log = get_logger("lease")


class Ticket:
    """One registered keeper. ``step`` runs on a worker when the ticket is due and returns
    the seconds until it is due again, or None when the keeper is done (lost, cancelled)."""

    def __init__(self, step: Callable[[], float | None]) -> None:
        self.step = step
        self.halted = False  #: stop() was called: run no further step
        self.queued = False  #: it has an entry in the heap
        self.running: threading.Thread | None = None  #: the worker running its step
        self.done = threading.Event()  #: no step runs and none will

    def alive(self) -> bool:
        return not self.done.is_set()


@dataclass(order=True)
class _Entry:
    due: float
    seq: int
    ticket: Ticket = field(compare=False)


class _Workers:
    """Daemon threads that run submitted callables; a submission never waits for a busy one."""

    def __init__(self) -> None:
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  #: workers waiting for a task and not yet reserved by a submission

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            self._tasks.put(task)
            if self._idle:
                self._idle -= 1  # reserved: that worker takes this task
                return
        threading.Thread(target=self._work, name="cronwarden-renewal", daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                task = self._tasks.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    try:  # a submission may have reserved this worker as the wait ended
                        task = self._tasks.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return
            task()
            with self._lock:
                self._idle += 1


class Scheduler:
    """Runs each registered ticket's step when due, on a worker (see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[_Entry] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._workers = _Workers()
        self._stale = 0  #: heap entries of halted tickets, dropped lazily

    def add(self, ticket: Ticket, delay: float) -> None:
        """Schedule ``ticket``'s first step in ``delay`` seconds."""
        with self._cond:
            self._push(ticket, delay)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="cronwarden-lease-scheduler", daemon=True
                )
                self._thread.start()

    def halt(self, ticket: Ticket) -> None:
        """Run no further step of ``ticket`` and wait until none is running (unless called
        from within its own step). Its heap entry is dropped when it comes up."""
        with self._cond:
            ticket.halted = True
            running = ticket.running
            if running is None:
                ticket.done.set()
            if ticket.queued:
                ticket.queued = False
                self._stale += 1
                if self._stale > 64 and self._stale * 2 > len(self._heap):
                    # most runs end long before their first renewal: drop their entries
                    self._heap = [e for e in self._heap if not e.ticket.halted]
                    heapq.heapify(self._heap)
                    self._stale = 0
        if running is not None and running is not threading.current_thread():
            ticket.done.wait()

    def _push(self, ticket: Ticket, delay: float) -> None:
        entry = _Entry(time.monotonic() + delay, next(self._seq), ticket)
        heapq.heappush(self._heap, entry)
        ticket.queued = True
        if self._heap[0] is entry:  # else the scheduler wakes earlier anyway: no switch per run
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    if self._heap and self._heap[0].due <= now:
                        ticket = heapq.heappop(self._heap).ticket
                        if ticket.halted:
                            self._stale = max(0, self._stale - 1)
                            continue  # its done event was set by halt()
                        ticket.queued = False
                        ticket.running = self._placeholder
                        break
                    self._cond.wait(self._heap[0].due - now if self._heap else None)
            self._workers.submit(lambda ticket=ticket: self._run(ticket))  # type: ignore[misc]

    #: marks a ticket handed to a worker that has not started it yet (halt() must wait)
    _placeholder = threading.Thread(name="cronwarden-renewal-pending")

    def _run(self, ticket: Ticket) -> None:
        with self._cond:
            ticket.running = threading.current_thread()
            halted = ticket.halted
        again: float | None = None
        try:
            if not halted:
                again = ticket.step()
        except Exception:  # a keeper's bug: say so, and renew that lease no more
            _log.exception("lease renewal step failed; this lease is no longer renewed")
        finally:
            with self._cond:
                ticket.running = None
                if again is None or ticket.halted:
                    ticket.done.set()
                else:
                    self._push(ticket, again)


_scheduler: Scheduler | None = None
_scheduler_lock = threading.Lock()


def scheduler() -> Scheduler:
    """The process's scheduler (made on first use; a forked child makes its own)."""
    global _scheduler
    with _scheduler_lock:
        if _scheduler is None:
            _scheduler = Scheduler()
        return _scheduler


def _after_fork() -> None:
    global _scheduler, _scheduler_lock
    _scheduler = None  # the parent's threads do not exist in the child
    _scheduler_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
