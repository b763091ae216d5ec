"""Honest triggers, visible state, listings that fold or speak JSON, overruns marked, logs a
platform can read."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import write_jobs

W = "2026-01-01T00:00Z"
JOBS = (
    "@cronwarden.job('fine', cron='*/5 * * * *', max_runtime='1m')\n"
    "def fine(ctx): ctx.count('done')\n"
    "@cronwarden.job('poison', cron='*/5 * * * *', max_runtime='1m',\n"
    "                retry=cronwarden.Retry(1, 0, 0))\n"
    "def poison(ctx): raise RuntimeError('the export server said no ' + 'x' * 200)\n"
    "@cronwarden.job('slow', cron='*/5 * * * *', max_runtime='1s')\n"
    "def slow(ctx): time.sleep(1.6)\n"
    "@cronwarden.job('sleepy', cron='*/5 * * * *', max_runtime='1s')\n"
    "def sleepy(ctx):\n"
    "    ctx.sleep(300)\n"
    "    ctx.count('woke_without_raising')\n"
)


def _jobs(tmp_path: Path) -> str:
    return write_jobs(tmp_path / "jobs.py", JOBS)


# -- trigger ----------------------------------------------------------------------------------
def test_trigger_says_already_succeeded_and_rerun_runs_it_again(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    assert cw("trigger", "--jobs", jobs, "fine", "--window", W).code == 0
    again = cw("trigger", "--jobs", jobs, "fine", "--window", W, "-o", "table")
    assert again.code == 0
    assert again.out.startswith(f"fine:{W}: already succeeded at ")
    assert again.out.endswith(" (use --rerun to run it again)")
    rerun = cw("trigger", "--jobs", jobs, "fine", "--window", W, "--rerun", "-o", "table")
    assert rerun.code == 0, rerun
    assert rerun.out == f"fine:{W}: enqueued again as re-run generation 1 (was succeeded)"
    rows = [json.loads(x) for x in cw("history", "--jobs", jobs, "fine").stdout.splitlines()]
    assert [(r["state"], r["attempt"], r["generation"]) for r in rows] == [("succeeded", 2, 1)]


def test_trigger_says_already_queued(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    first = cw("trigger", "--jobs", jobs, "fine", "--window", W, "--no-wait", "-o", "table")
    assert (first.code, first.out) == (0, f"fine:{W}: enqueued")
    second = cw("trigger", "--jobs", jobs, "fine", "--window", W, "--no-wait", "-o", "table")
    assert (second.code, second.out) == (0, f"fine:{W}: already queued")


def test_trigger_of_a_dead_lettered_window_says_so_and_exits_1(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    assert cw("trigger", "--jobs", jobs, "poison", "--window", W).code == 1
    again = cw("trigger", "--jobs", jobs, "poison", "--window", W, "-o", "table")
    assert again.code == 1
    assert again.out.startswith(f"poison:{W}: already dead-lettered at ")
    assert again.out.endswith("(use --rerun, or `cronwarden dlq redrive`)")


# -- state ------------------------------------------------------------------------------------
def test_read_only_commands_never_create_state(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    for args in (
        ["status", "--jobs", jobs],
        ["history", "--jobs", jobs, "fine"],
        ["check", "--jobs", jobs],
        ["dlq", "list"],
    ):
        result = cw(*args, "--state", "elsewhere/state.db")
        assert result.code == 2, result
        assert result.err == (
            f"error: no cronwarden state at {tmp_path}/elsewhere/state.db (nothing has run "
            "with this state); pass --state PATH or set $CRONWARDEN_LOCAL_PATH"
        )
    assert not (tmp_path / "elsewhere").exists()


def test_status_names_its_state_and_dlq_accepts_jobs(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    cw("trigger", "--jobs", jobs, "poison", "--window", W, "--state", "s.db")
    status = cw("status", "--jobs", jobs, "--state", "s.db", "-o", "table")
    assert status.code == 0
    assert status.out == f"state: {tmp_path}/s.db (queue: {tmp_path}/s.db-queue) (provider local)"
    listing = cw("dlq", "list", "--jobs", jobs, "--state", "s.db")
    assert listing.code == 0
    (row,) = [json.loads(line) for line in listing.stdout.splitlines()]
    assert row["run_key"] == f"poison:{W}" and row["dead_lettered_at"]


# -- listings ---------------------------------------------------------------------------------
def test_tables_fold_at_80_columns_instead_of_cutting(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    cw("trigger", "--jobs", jobs, "poison", "--window", W)
    for args in (["status", "--jobs", jobs], ["history", "--jobs", jobs, "poison", "--long"]):
        result = cw(*args, "-o", "table", env={"COLUMNS": "80"})
        assert result.code == 0, result
        assert "…" not in result.stdout, result.stdout
        table = [line for line in result.stdout.splitlines() if line[:1] in "┏┃┡│└"]
        assert table and max(len(line) for line in table) <= 80


def test_history_json_has_every_field_and_the_error_in_full(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    cw("trigger", "--jobs", jobs, "poison", "--window", W)
    (row,) = [json.loads(x) for x in cw("history", "--jobs", jobs, "poison").stdout.splitlines()]
    assert set(row) >= {
        "window",
        "state",
        "attempt",
        "started_at",
        "finished_at",
        "duration_ms",
        "reason",
        "counters",
        "worker",
        "error",
        "overran",
    }
    assert row["error"] == "RuntimeError: the export server said no " + "x" * 200


def test_dlq_show_has_the_time_and_the_runs_error(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    cw("trigger", "--jobs", jobs, "poison", "--window", W)
    (row,) = [json.loads(line) for line in cw("dlq", "list").stdout.splitlines()]
    shown = json.loads(cw("dlq", "show", row["message_id"]).stdout)
    assert shown["dead_lettered_at"] and shown["run"]["state"] == "dead_lettered"
    assert shown["run"]["error"].startswith("RuntimeError: the export server said no")
    assert shown["run"]["traceback"].startswith("Traceback (most recent call last):")
    assert 'jobs.py", line 6, in poison' in shown["run"]["traceback"]


# -- overrun and deadline ---------------------------------------------------------------------
def test_an_overrun_is_logged_and_marked_in_history_and_status(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    result = cw("trigger", "--jobs", jobs, "slow", "--window", W)
    events = [json.loads(x) for x in result.stderr.splitlines() if x.startswith("{")]
    overran = [e for e in events if e["event"] == "run.overran"]
    assert overran and overran[0]["severity"] == "WARNING" and overran[0]["max_runtime_ms"] == 1000
    (row,) = [json.loads(x) for x in cw("history", "--jobs", jobs, "slow").stdout.splitlines()]
    assert row["overran"] is True
    rows = [json.loads(x) for x in cw("status", "--jobs", jobs).stdout.splitlines()]
    slow = next(r for r in rows if r["job"] == "slow")
    assert "overran" in slow["alerts"] and slow["health"] == "not ok"


def test_ctx_sleep_raises_at_the_deadline_not_after(cw, tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    result = cw("trigger", "--jobs", jobs, "sleepy", "--window", W)  # the helper times out at 120s
    (row,) = [json.loads(x) for x in cw("history", "--jobs", jobs, "sleepy").stdout.splitlines()]
    assert row["state"] == "failed" and row["error"].startswith("Cancelled: run passed its max")
    assert "woke_without_raising" not in row["counters"]
    assert result.code == 1


# -- logs -------------------------------------------------------------------------------------
def test_log_lines_carry_severity_and_run_started_the_version_and_commit(
    cw, tmp_path: Path
) -> None:
    jobs = _jobs(tmp_path)
    result = cw(
        "trigger", "--jobs", jobs, "poison", "--window", W, env={"CRONWARDEN_COMMIT": "abc1234"}
    )
    events = [json.loads(x) for x in result.stderr.splitlines() if x.startswith("{")]
    assert all(e["severity"] in {"INFO", "WARNING", "ERROR"} for e in events)
    dead = next(e for e in events if e["event"] == "run.dead_lettered")
    assert (dead["severity"], dead["severityLevel"]) == ("ERROR", "Error")
    started = next(e for e in events if e["event"] == "run.started")
    assert started["commit"] == "abc1234" and started["version"] not in ("", "unknown")
