"""Several ``cronwarden run`` processes ("hosts") sharing one PostgreSQL database, every one
running its own scheduler, workers and watcher: each window runs once, every ledger item once,
nothing is left queued or dead-lettered. Takes about two minutes (two real minute windows)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore
from cronwarden.model import run_key
from cronwarden.model.ports import RUN, STATUS, Key
from tests.support.procs import ROOT, effects

from . import hosts_jobs

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
HOSTS = 3


def _start_host(tmp_path: Path, n: int, dsn: str, schema: str) -> subprocess.Popen[bytes]:
    exe = shutil.which("cronwarden")
    argv = [exe] if exe else [sys.executable, "-c", "from cronwarden.cli import main; main()"]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CW_TEST_EFFECTS": str(tmp_path / "effects.db"),
        "CRONWARDEN_POSTGRES_SCHEMA": schema,
    }
    env.pop("CRONWARDEN_POSTGRES_DSN", None)  # the DSN comes from --dsn
    log = open(tmp_path / f"host{n}.log", "wb")  # noqa: SIM115 - closed after start
    try:
        return subprocess.Popen(
            [
                *argv,
                "run",
                "--provider",
                "postgres",
                "--dsn",
                dsn,
                "--jobs",
                str(Path(hosts_jobs.__file__)),
                "--workers",
                "2",
            ],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()


def _logs(tmp_path: Path, n: int) -> list[dict[str, Any]]:
    lines = (tmp_path / f"host{n}.log").read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def _next_minute(after: datetime) -> datetime:
    return after.replace(second=0, microsecond=0) + timedelta(minutes=1)


def test_hosts_sharing_one_database_run_each_window_once(
    tmp_path: Path, postgres_dsn: str, postgres_schema: str
) -> None:
    procs = [_start_host(tmp_path, n, postgres_dsn, postgres_schema) for n in range(HOSTS)]
    try:
        # Windows fired by every host: the first minute boundary after all have started.
        first = _next_minute(datetime.now(UTC) + timedelta(seconds=10))
        windows = [first, first + timedelta(minutes=1)]
        fx = tmp_path / "effects.db"

        def finished() -> bool:
            items = {e["item"] for e in effects(fx, "item")}
            ticks = {e["item"] for e in effects(fx, "tick")}
            return all(
                run_key("tick", w) in ticks
                and all(f"{run_key('fan', w)}/{i}" in items for i in range(hosts_jobs.ITEMS))
                for w in windows
            )

        end = time.monotonic() + (windows[-1] - datetime.now(UTC)).total_seconds() + 90
        while not finished():
            assert all(p.poll() is None for p in procs), "a host exited"
            assert time.monotonic() < end, "the windows did not complete in time"
            time.sleep(0.5)

        settings = PostgresSettings(dsn=postgres_dsn, schema=postgres_schema, expire_every=0)
        store, queue = PostgresStore(settings), PostgresQueue(settings)
        try:
            # Settled: the runs finished and nothing is left queued (the worker acks after
            # the completion commit, so poll rather than assume).
            end = time.monotonic() + 60
            while True:
                runs = {
                    (job, w): store.get(Key(RUN, job, run_key(job, w).split(":", 1)[1]))
                    for job in ("tick", "fan")
                    for w in windows
                }
                settled = all(
                    r is not None and r.data["state"] == "succeeded" for r in runs.values()
                )
                if settled and queue.depth() == 0:
                    break
                assert time.monotonic() < end, f"not settled: {runs}, depth {queue.depth()}"
                time.sleep(0.2)
            assert queue.dlq_depth() == 0
            for job in ("tick", "fan"):
                status = store.get(Key(STATUS, job))
                assert status is not None and status.data["consecutive_failures"] == 0
        finally:
            store.close()
            queue.close()
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    ticks = Counter(e["item"] for e in effects(fx, "tick"))
    items = Counter(e["item"] for e in effects(fx, "item"))
    assert all(count == 1 for count in ticks.values()), ticks  # no window ran twice
    assert all(count == 1 for count in items.values()), items  # no item ran twice
    logs = [_logs(tmp_path, n) for n in range(HOSTS)]
    for n, host_logs in enumerate(logs):
        enqueued = {e.get("run_key") for e in host_logs if e.get("event") == "run.enqueued"}
        for w in windows:  # every host scheduled every window: the duplicates met one key
            assert {run_key("tick", w), run_key("fan", w)} <= enqueued, (n, enqueued)
        errors = [e for e in host_logs if e.get("level") == "error"]
        assert errors == [], errors
    ran_on = Counter(
        n
        for n, host_logs in enumerate(logs)
        for e in host_logs
        if e.get("event") == "run.completed"
    )
    print(f"runs completed per host: {dict(ran_on)}; windows {[w.isoformat() for w in windows]}")
