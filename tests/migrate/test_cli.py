"""``cronwarden migrate`` as a user runs it: one-line errors for bad input (exit 2), a move
between two local states, ``status`` on the source, ``--verify`` exiting 1 on a difference."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import Result, cronwarden_argv, environment, write_jobs

JOBS = "@cronwarden.job('x', cron='* * * * *', max_runtime='1m')\ndef x(ctx): pass\n"


def cw(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    done = subprocess.run(
        [*cronwarden_argv(), *args],
        capture_output=True,
        text=True,
        env=environment(tmp_path, env),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    return Result(done)


@pytest.fixture
def two(tmp_path: Path) -> list[str]:
    """The common arguments: jobs, and two local states a and b with an env file each."""
    write_jobs(tmp_path / "jobs.py", JOBS)
    for side in ("a", "b"):
        (tmp_path / f"{side}.env").write_text(f"CRONWARDEN_LOCAL_PATH={tmp_path / side}.db\n")
    return [
        "migrate",
        "--jobs",
        "jobs.py",
        "--from",
        "local",
        "--to",
        "local",
        "--from-env",
        "a.env",
        "--to-env",
        "b.env",
        "--from-label",
        "a",
        "--to-label",
        "b",
    ]


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            {"--from-label": None, "--to-label": None},
            "error: --from and --to are both 'local'; give --from-label / --to-label",
        ),
        ({"--job": "nope"}, "error: unknown job(s) nope; known: x"),
        ({"--dry-run": "", "--verify": ""}, "error: --prepare, --dry-run and --verify are"),
        ({"--wait": "-1"}, "error: --wait must be 0 or more seconds, got -1.0"),
        ({"--from-env": "missing.env"}, "error: env file missing.env: No such file or directory"),
        ({"--from-env": "bad.env"}, "error: env file bad.env:2: expected NAME=value"),
        ({"--from-env": "none.env"}, "error: source state /nowhere/state.db does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, two: list[str], change: dict[str, str | None], line: str
) -> None:
    (tmp_path / "bad.env").write_text("# a comment\nnot an assignment\n")
    (tmp_path / "none.env").write_text("export CRONWARDEN_LOCAL_PATH='/nowhere/state.db'\n")
    args = list(two)
    for name, value in change.items():
        if name in args:
            at = args.index(name)
            del args[at : at + 2]
        if value is not None:
            args += [name] if value == "" else [name, value]
    result = cw(tmp_path, *args)
    assert result.code == 2, result
    assert result.err.startswith(line), result
    assert "Traceback" not in result.stderr


def test_a_move_between_two_local_states(tmp_path: Path, two: list[str]) -> None:
    ran = cw(
        tmp_path,
        "run",
        "--jobs",
        "jobs.py",
        "--once",
        env={"CRONWARDEN_LOCAL_PATH": str(tmp_path / "a.db")},
    )
    assert ran.code == 0, ran
    dry = cw(tmp_path, *two, "--dry-run")
    assert dry.code == 0, dry
    assert dry.stdout.splitlines() == [
        "x: would move status 1, run 1, item 0, outbox 0, dead letters 0, forward 0 "
        "unfinished window(s) to b",
        "dry run: nothing written",
    ]
    moved = cw(tmp_path, *two)
    assert moved.code == 0, moved
    assert moved.stdout.splitlines()[-1] == "moved 1 job(s) from a to b"
    status = cw(
        tmp_path,
        "status",
        "--jobs",
        "jobs.py",
        env={"CRONWARDEN_LOCAL_PATH": str(tmp_path / "a.db")},
    )
    assert status.code == 0, status
    assert "moved to b (succeeded)" in status.stdout
    verified = cw(tmp_path, *two, "--verify")
    assert verified.code == 0, verified
    assert verified.stdout.splitlines()[-1] == "verify: 1 job(s) moved as claimed"
    with sqlite3.connect(tmp_path / "b.db") as db:  # lose the moved run record
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert "records" in tables, tables
        db.execute("DELETE FROM records WHERE kind = 'run'")
    broken = cw(tmp_path, *two, "--verify")
    assert broken.code == 1, broken
    assert "DIFFERENCE: run" in broken.stdout and "missing on destination" in broken.stdout


POISON = (
    "@cronwarden.job('poison', cron='0 * * * *', max_runtime='1m',\n"
    "                retry=cronwarden.Retry(max_attempts=1))\n"
    "def poison(ctx): raise RuntimeError('bad input')\n"
)


def test_dead_letters_of_jobs_left_behind_are_named_and_fail_a_whole_move(
    tmp_path: Path, two: list[str]
) -> None:
    """The source holds a dead letter of a job the module no longer declares: a move of the
    whole module (the source is about to be retired) names it and exits 1, so does
    ``--verify``; ``--job x`` (the rest knowingly later) names it and exits 0; once its window
    is resolved on the source nothing is lost by leaving it, and the move exits 0."""
    write_jobs(tmp_path / "old.py", JOBS + POISON)
    on_a = {"CRONWARDEN_LOCAL_PATH": str(tmp_path / "a.db")}
    ran = cw(tmp_path, "run", "--jobs", "old.py", "--once", env=on_a)
    assert ran.code == 1 and "dead lettered (poison:" in ran.stdout, ran
    window = ran.stdout.split("dead lettered (poison:")[1].split(")")[0]

    dry = cw(tmp_path, *two, "--dry-run")
    assert dry.code == 0, dry
    left = "left on a: poison (not among the jobs moved); 1 dead letter(s) of unaccounted"
    assert any(line.startswith(left) for line in dry.stdout.splitlines()), dry
    moved = cw(tmp_path, *two)
    assert moved.code == 1, moved
    assert any(line.startswith(left) for line in moved.stdout.splitlines()), moved
    assert "1 dead letter(s) that did not move stay on a" in moved.stderr, moved
    verified = cw(tmp_path, *two, "--verify")
    assert verified.code == 1 and "did not move stay on a" in verified.stderr, verified
    some = cw(tmp_path, *two, "--job", "x")
    assert some.code == 0 and left in some.stdout, some

    resolved = cw(
        tmp_path,
        *("dlq", "resolve", "--jobs", "old.py", "--job", "poison"),
        *("--window", window, "--reason", "retired job"),
        env=on_a,
    )
    assert resolved.code == 0, resolved
    again = cw(tmp_path, *two)
    assert again.code == 0, again
    assert "left on a: poison (not among the jobs moved)" in again.stdout.splitlines(), again
