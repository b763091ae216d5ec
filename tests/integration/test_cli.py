"""The ``cronwarden`` command as users run it (the installed console script)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "nightly_export.py")


def cw(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("cronwarden") or ""
    argv = [exe] if exe else [sys.executable, "-c", "from cronwarden.cli import main; main()"]
    full_env = {
        **os.environ,
        "CRONWARDEN_LOCAL_PATH": str(tmp_path / "state.db"),
        "COLUMNS": "200",
        **(env or {}),
    }
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, env=full_env, cwd=tmp_path, timeout=120
    )


def test_run_once_executes_the_example_and_sends_each_mail_once(tmp_path: Path) -> None:
    first = cw(tmp_path, "run", "--jobs", EXAMPLE, "--once")
    assert first.returncode == 0, first.stderr
    assert "nightly-export" in first.stdout and "ok" in first.stdout
    import sqlite3

    with sqlite3.connect(tmp_path / "mail.db") as db:
        sent = db.execute("SELECT count(*), count(DISTINCT idem) FROM sent").fetchone()
    assert sent[0] == sent[1] and sent[0] % 25 == 0 and sent[0] >= 25
    again = cw(tmp_path, "run", "--jobs", EXAMPLE, "--once")
    assert again.returncode == 0
    with sqlite3.connect(tmp_path / "mail.db") as db:
        rows = db.execute("SELECT recipient, json_extract(body, '$.window') FROM sent").fetchall()
    # The second run may catch up one more missed night (oldest first, one per tick), but no
    # customer ever gets the same night's report twice.
    assert len(rows) == len(set(rows)) and len(rows) <= sent[0] + 25
    status = cw(tmp_path, "status", "--jobs", EXAMPLE)
    assert status.returncode == 0 and "succeeded" in status.stdout
    history = cw(tmp_path, "history", "--jobs", EXAMPLE, "nightly-export")
    assert history.returncode == 0 and "succeeded" in history.stdout
    check = cw(tmp_path, "check", "--jobs", EXAMPLE)
    assert check.returncode == 0 and "healthy" in check.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--jobs", "no/such/file.py", "--once"], "does not exist"),
        (["run", "--jobs", "no_such_module_xyz", "--once"], "cannot import job module"),
        (["status", "--jobs", EXAMPLE, "--provider", "nimbus"], "unknown provider 'nimbus'"),
        (["history", "--jobs", EXAMPLE, "nope"], "unknown job 'nope'"),
        (["trigger", "--jobs", EXAMPLE, "nightly-export", "--window", "soon"], "not an ISO time"),
        (["dlq", "show", "missing-id"], "no dead letter"),
        (["dlq", "redrive", "--limit", "0"], "at least 1"),
    ],
)
def test_bad_input_gives_one_clear_line_and_nonzero_exit(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = cw(tmp_path, *args)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("{")]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_invalid_job_definition_is_reported_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "bad_jobs.py"
    bad.write_text(
        "import cronwarden\n"
        "@cronwarden.job('x', cron='0 25 * * *', max_runtime='1m')\n"
        "def x(ctx): pass\n"
    )
    result = cw(tmp_path, "status", "--jobs", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip() == "error: cron '0 25 * * *': Bad hour"


def test_poison_job_check_fails_then_dlq_list_and_redrive(tmp_path: Path) -> None:
    jobs = tmp_path / "poison_jobs.py"
    jobs.write_text(
        "import os, cronwarden\n"
        "@cronwarden.job('poison', cron='*/5 * * * *', max_runtime='1m',\n"
        "                retry=cronwarden.Retry(1, 0, 0))\n"
        "def poison(ctx):\n"
        "    if not os.environ.get('FIXED'):\n"
        "        raise RuntimeError('AccountKey=c2VjcmV0a2V5MTIzNDU2Nzg5MA== rejected')\n"
    )
    run = cw(tmp_path, "trigger", "--jobs", str(jobs), "poison")
    # [operator] exit-status contract: a dead-lettered run the command waited for exits 1
    assert run.returncode == 1, run.stderr
    assert "c2VjcmV0a2V5MTIzNDU2Nzg5MA" not in run.stderr + run.stdout
    check = cw(tmp_path, "check", "--jobs", str(jobs))
    assert check.returncode == 1
    assert "dead_letters" in check.stdout or "dead-letter" in check.stdout
    listing = cw(tmp_path, "dlq", "list")
    assert "MaxAttemptsExceeded" in listing.stdout
    assert "c2VjcmV0a2V5MTIzNDU2Nzg5MA" not in listing.stdout
    redrive = cw(tmp_path, "dlq", "redrive", "--limit", "5")
    assert "redrove 1 message" in redrive.stdout
    fixed = cw(tmp_path, "run", "--jobs", str(jobs), "--once", env={"FIXED": "1"})
    assert fixed.returncode == 0, fixed.stderr
    history = cw(tmp_path, "history", "--jobs", str(jobs), "poison")
    assert "succeeded" in history.stdout


def test_backfill_enqueues_missing_windows_oldest_first(tmp_path: Path) -> None:
    result = cw(
        tmp_path,
        "backfill",
        "--jobs",
        EXAMPLE,
        "nightly-export",
        "--from",
        "2026-01-01T00:00Z",
        "--to",
        "2026-01-05T00:00Z",
        "--wait",
    )
    assert result.returncode == 0, result.stderr
    assert "enqueued 4 window(s)" in result.stdout
    started = [line for line in result.stderr.splitlines() if '"run.started"' in line]
    windows = [line.split('"window": "')[1][:17] for line in started]
    assert windows == sorted(windows) and len(windows) == 4
    again = cw(
        tmp_path,
        "backfill",
        "--jobs",
        EXAMPLE,
        "nightly-export",
        "--from",
        "2026-01-01T00:00Z",
        "--to",
        "2026-01-05T00:00Z",
    )
    assert "enqueued 0 window(s)" in again.stdout


def test_import_cronwarden_is_light_and_imports_no_cloud_sdk() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import cronwarden\n"
        "cronwarden.job; cronwarden.RunContext; cronwarden.Engine; cronwarden.Watcher\n"
        "# (a .pth of functions-framework pre-creates an empty 'google' namespace: diff)\n"
        "bad = [m for m in set(sys.modules) - before if m.split('.')[0] in "
        "('google', 'azure', 'proton', 'functions_framework', 'click', 'rich', 'grpc')]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
