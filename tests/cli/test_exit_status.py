"""Exit status: 0 only when every run waited for succeeded; 1 failed / dead-lettered / still
retrying (the line says so); 130 / 143 after a graceful stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from .conftest import cronwarden_argv, environment, write_jobs

W = "2026-01-01T00:00Z"


def _jobs(tmp_path: Path, *, slow: bool = True) -> str:
    return write_jobs(
        tmp_path / "jobs.py",
        "@cronwarden.job('fine', cron='*/5 * * * *', max_runtime='1m')\n"
        "def fine(ctx): ctx.count('done')\n"
        "@cronwarden.job('poison', cron='*/5 * * * *', max_runtime='1m',\n"
        "                retry=cronwarden.Retry(1, 0, 0))\n"
        "def poison(ctx): raise RuntimeError('always')\n"
        "@cronwarden.job('flaky', cron='*/5 * * * *', max_runtime='1m',\n"
        "                retry=cronwarden.Retry(3, '1h', '1h'))\n"
        "def flaky(ctx): raise RuntimeError('not yet')\n" + SLOW * slow,
    )


SLOW = (
    "@cronwarden.job('looping', cron='*/5 * * * *', max_runtime='10m')\n"
    "def looping(ctx):\n"
    "    while True: ctx.sleep(0.1)\n"
    "@cronwarden.job('blocking', cron='*/5 * * * *', max_runtime='10m')\n"
    "def blocking(ctx): time.sleep(60)\n"
)


def test_trigger_of_a_run_that_succeeds_exits_0(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    result = cw("trigger", "--jobs", jobs, "fine", "--window", W, "-o", "table")
    assert result.code == 0, result
    assert result.out == f"fine:{W}: enqueued"
    assert result.stdout.splitlines()[1] == "ok: 1 run(s) succeeded"


def test_trigger_of_a_run_that_is_dead_lettered_exits_1(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    result = cw("trigger", "--jobs", jobs, "poison", "--window", W, "-o", "table")
    assert result.code == 1, result
    assert result.stdout.splitlines()[1] == f"not ok: 1 dead lettered (poison:{W}) of 1 run(s)"


def test_trigger_of_a_run_still_retrying_exits_1(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    result = cw("trigger", "--jobs", jobs, "flaky", "--window", W, "-o", "table")
    assert result.code == 1, result
    assert result.stdout.splitlines()[1] == f"not ok: 1 is still retrying (flaky:{W}) of 1 run(s)"


def test_backfill_wait_with_a_failing_run_exits_1(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    result = cw(
        "backfill", "--jobs", jobs, "poison", "--from", W, "--to", "2026-01-01T00:05Z", "--wait"
    )
    assert result.code == 1, result
    assert result.out == "enqueued 2 window(s)"
    assert result.stdout.splitlines()[1].startswith("not ok: 2 dead lettered (poison:")


def test_run_once_exits_1_when_a_run_failed(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path, slow=False)
    result = cw("run", "--jobs", jobs, "--once", "-o", "json", env={"COLUMNS": "80"})
    assert result.code == 1, result
    first = json.loads(result.out)
    assert first["result"] == "not ok" and "dead lettered" in first["message"]


def test_run_once_exits_0_on_the_example(cw) -> None:
    from .conftest import EXAMPLE

    result = cw("run", "--jobs", EXAMPLE, "--once", "-o", "table")
    assert result.code == 0, result
    assert result.out.startswith("ok: ") and result.out.endswith("run(s) succeeded")


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*cronwarden_argv(), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(tmp_path),
        cwd=tmp_path,
        start_new_session=True,
    )


def _wait_for_line(proc: subprocess.Popen[str], needle: str, deadline: float = 60.0) -> list[str]:
    assert proc.stderr is not None
    seen: list[str] = []
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} not seen:\n{''.join(seen)}")


def _events(text: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_sigterm_stops_a_cooperative_handler_records_it_and_exits_143(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    proc = _start(tmp_path, "trigger", "--jobs", jobs, "looping", "--window", W, "--grace", "20")
    try:
        seen = _wait_for_line(proc, '"run.started"')
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, out + err
    events = [e["event"] for e in _events("".join(seen) + err)]
    assert "runtime.stopping" in events and "runtime.stopped" in events
    failed = [e for e in _events(err) if e["event"] == "run.failed"]
    assert failed and "Cancelled" in failed[0]["message"]


def test_sigint_stops_and_exits_130(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    proc = _start(tmp_path, "trigger", "--jobs", jobs, "looping", "--window", W)
    try:
        _wait_for_line(proc, '"run.started"')
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out + err


def test_a_handler_that_ignores_the_stop_is_left_after_the_grace_and_logged(
    tmp_path: Path,
) -> None:
    jobs = _jobs(tmp_path)
    proc = _start(tmp_path, "trigger", "--jobs", jobs, "blocking", "--window", W, "--grace", "1")
    try:
        _wait_for_line(proc, '"run.started"')
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, out + err
    abandoned = [e for e in _events(err) if e["event"] == "runtime.abandoned"]
    assert abandoned and abandoned[0]["left"] == [f"blocking:{W}"], err


def test_run_serve_exits_130_on_sigint(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    proc = _start(tmp_path, "run", "--jobs", jobs)
    try:
        _wait_for_line(proc, '"runtime.serving"')
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err


def test_backfill_says_how_many_windows_are_left(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path, slow=False)
    result = cw(
        "backfill", "--jobs", jobs, "fine", "--from", W, "--to", "2026-01-01T01:00Z", "--limit", "5"
    )
    assert result.code == 0, result
    assert (
        result.out
        == "enqueued 5 window(s); 8 more missing window(s) left (run again or raise --limit)"
    )
