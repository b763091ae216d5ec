"""One chaos trial: worker processes on a stack, fault injection helpers, and the verdict.

Every worker is a subprocess in its own process group (``start_new_session``), killed by pgid;
:meth:`Trial.close` stops every one still running, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cronwarden import JobSet, RunRequest, Watcher
from cronwarden.model import format_window
from cronwarden.model.ports import RUN, Key, Queue, Store
from cronwarden.watch.watcher import Alert, Condition

from . import jobs
from .checker import Expect, Verdict, check
from .history import connect
from .stacks import Stack, build

ROOT = Path(__file__).resolve().parents[2]
JOBS = JobSet.from_module(jobs)


def poll(predicate: Callable[[], Any], *, deadline: float, what: str, every: float = 0.05) -> Any:
    end = time.monotonic() + deadline
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"{what} not reached within {deadline}s")
        time.sleep(every)


@dataclass
class WorkerProc:
    popen: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]

    @property
    def pid(self) -> int:
        return self.popen.pid

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def alive(self) -> bool:
        return self.popen.poll() is None


class Capture:
    """A notifier that keeps every alert."""

    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> None:
        self.alerts.append(alert)


@dataclass
class Trial:
    stack: Stack
    tmp: Path
    max_deliveries: int = 5
    margin: float = 1.0
    spec: dict[str, Any] = field(init=False)
    history: str = field(init=False)
    workers: list[WorkerProc] = field(default_factory=list)
    store: Store = field(init=False)
    queue: Queue = field(init=False)
    alerts: list[Alert] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.spec = self.stack.new_spec(self.tmp, max_deliveries=self.max_deliveries)
        self.history = str(self.tmp / "history.db")
        connect(self.history).close()
        self.store, self.queue = build(self.spec)
        ensure = getattr(self.queue, "ensure_resources", None)
        if ensure is not None:
            ensure()

    # -- workers ------------------------------------------------------------------------------
    def start_worker(self, **env: str) -> WorkerProc:
        full = {
            **os.environ,
            "CW_CHAOS_SPEC": json.dumps(self.spec),
            "CW_CHAOS_HISTORY": self.history,
            "CW_CHAOS_MARGIN": str(self.margin),
            "CW_CHAOS_FIXED": str(self.tmp / "fixed"),
            "PYTHONPATH": str(ROOT),
            "CHAOS_UPSTREAM_CONNECTION_STRING": jobs.SECRET_CONNECTION_STRING,  # the canary
            **env,
        }
        log = self.tmp / f"worker-{len(self.workers)}.log"
        with open(log, "ab") as sink:
            popen = subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.worker"],
                cwd=ROOT,
                env=full,
                stdout=subprocess.DEVNULL,
                stderr=sink,
                start_new_session=True,  # its own process group: killed by pgid
            )
        proc = WorkerProc(popen, log, env)
        self.workers.append(proc)
        return proc

    def start_workers(self, n: int, **env: str) -> list[WorkerProc]:
        procs = [self.start_worker(**env) for _ in range(n)]
        for proc in procs:
            poll(
                lambda p=proc: b"chaos.worker.ready" in p.log.read_bytes() or not p.alive(),
                deadline=60,
                what="worker ready",
            )
        return procs

    def kill(self, proc: WorkerProc) -> None:
        proc.signal(signal.SIGCONT)
        proc.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=10)

    def close(self) -> None:
        for proc in self.workers:
            if proc.alive():
                proc.signal(signal.SIGCONT)
                proc.signal(signal.SIGTERM)
        end = time.monotonic() + 15
        for proc in self.workers:
            try:
                proc.popen.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(proc)
        with contextlib.suppress(Exception):
            self.queue.close()
        with contextlib.suppress(Exception):
            self.store.close()
        self.stack.drop(self.spec)

    # -- requests -----------------------------------------------------------------------------
    def publish(self, request: RunRequest, copies: int = 1) -> None:
        """``copies`` deliveries of one request (no dedup id: the broker delivers every one)."""
        body = request.to_json()
        attributes = {"job": request.job, "window": format_window(request.window)}
        for _ in range(copies):
            self.queue.publish(body, attributes=attributes)

    def run_record(self, run_key: str) -> dict[str, Any]:
        job, window = run_key.split(":", 1)
        found = self.store.get(Key(RUN, job, window))
        return dict(found.data) if found else {}

    def final_runs(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        return {k: self.run_record(k) for k in keys}

    def wait_terminal(self, keys: Iterable[str], *, deadline: float) -> dict[str, Any]:
        keys = list(keys)

        def done() -> dict[str, Any] | None:
            runs = self.final_runs(keys)
            states = {r.get("state") for r in runs.values()}
            return runs if states <= {"succeeded", "dead_lettered"} else None

        return dict(poll(done, deadline=deadline, what=f"{keys} finished", every=0.2))

    # -- verdict ------------------------------------------------------------------------------
    def watch(self) -> list[Alert]:
        capture = Capture()
        Watcher(JOBS, self.store, self.queue, notifiers=[capture]).check()
        self.alerts += capture.alerts
        return capture.alerts

    def texts(self) -> list[str]:
        """Every log line, alert, dead-letter text and stored error of the trial."""
        out: list[str] = []
        for proc in self.workers:
            with contextlib.suppress(OSError):
                out += proc.log.read_text(errors="replace").splitlines()
        for alert in self.alerts:
            out.append(alert.text + json.dumps(alert.fields(), default=str))
        for dl in self.queue.dlq_peek(100):
            out.append(f"{dl.reason} {dl.description}")
        for kind in (RUN, "status"):
            for record in self.store.query(kind):
                out.append(json.dumps(record.data, default=str))
        return out

    def dead_lettered(self) -> set[str]:
        keys = set()
        for dl in self.queue.dlq_peek(100):
            with contextlib.suppress(Exception):
                body = json.loads(dl.body)
                keys.add(f"{body['job']}:{body['window']}")
        return keys

    def verdict(self, expect: Expect) -> Verdict:
        self.watch()
        alerted = set()
        for alert in self.alerts:
            if alert.firing and alert.kind is Condition.DEAD_LETTERS:
                alerted.add("*")
            elif alert.firing and alert.kind is Condition.FAILING:
                alerted.add(alert.job)
        return check(
            self.history,
            expect,
            final_runs=self.final_runs(expect.windows),
            dead_lettered=self.dead_lettered(),
            alerted_jobs=alerted,
            texts=self.texts(),
            canaries=jobs.CANARIES,
            dlq_depth=self.queue.dlq_depth(),
        )

    def takeover_times(self, run_key: str) -> dict[int, float]:
        """fence → wall time its claim was accepted."""
        conn = connect(self.history)
        try:
            rows = conn.execute(
                "SELECT fence, MIN(t_after) FROM commits WHERE status='accepted' AND run_key=? "
                "GROUP BY fence",
                (run_key,),
            ).fetchall()
        finally:
            conn.close()
        return {int(f): float(t) for f, t in rows if f is not None}
