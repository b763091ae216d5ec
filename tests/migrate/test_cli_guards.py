"""``cronwarden migrate`` refuses what would lose state, as a user runs it on two SQLite
sides: a destination that ran the jobs itself (its own newer state would be overwritten), one
store given as both sides, a ``--wait`` that is no finite number of seconds; and a dry run (or
``--verify``) creates no file and plans what the move then does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import write_jobs
from tests.migrate.test_cli import cw

JOBS = (
    "@cronwarden.job('sync', cron='0 * * * *', max_runtime='1m')\n"
    "def sync(ctx): pass\n"
    "@cronwarden.job('fails', cron='0 * * * *', max_runtime='1m',\n"
    "                retry=cronwarden.Retry(max_attempts=1))\n"
    "def fails(ctx): raise RuntimeError('bad input')\n"
)


def on(tmp_path: Path, side: str) -> dict[str, str]:
    return {"CRONWARDEN_LOCAL_PATH": str(tmp_path / side / "state.db")}


def trigger(tmp_path: Path, side: str, job: str, window: str) -> None:
    ran = cw(
        tmp_path, "trigger", "--jobs", "jobs.py", job, "--window", window, env=on(tmp_path, side)
    )
    assert ran.code in (0, 1), ran  # 1: the run of `fails` failed, as it should


def records(path: Path) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT kind, job, id, data FROM records"))


def migrate(src: str, dst: str, *extra: str) -> list[str]:
    return [
        *("migrate", "--jobs", "jobs.py", "--from", "local", "--to", "local"),
        *("--from-env", f"{src}.env", "--to-env", f"{dst}.env"),
        *("--from-label", src, "--to-label", dst, *extra),
    ]


@pytest.fixture
def sides(tmp_path: Path) -> Path:
    """Job ``sync`` succeeded for 12:00 on ``src``; env files for ``src``, ``dst`` and
    ``fresh`` (a state that does not exist yet)."""
    write_jobs(tmp_path / "jobs.py", JOBS)
    for side in ("src", "dst", "fresh"):
        (tmp_path / side).mkdir()
        (tmp_path / f"{side}.env").write_text(f"CRONWARDEN_LOCAL_PATH={tmp_path / side}/state.db\n")
    trigger(tmp_path, "src", "sync", "2026-01-01T12:00:00Z")
    return tmp_path


def test_a_destination_that_ran_the_jobs_itself_is_refused_and_left_as_it_was(
    sides: Path,
) -> None:
    """``dst`` ran ``sync`` for 13:00 (newer than the source's 12:00) and dead-lettered
    ``fails``: the dry run, ``--prepare`` and the move each exit 2 naming both jobs and what
    ``dst`` holds, and write nothing to either side."""
    trigger(sides, "dst", "sync", "2026-01-01T13:00:00Z")
    trigger(sides, "dst", "fails", "2026-01-01T13:00:00Z")
    before = records(sides / "dst" / "state.db"), records(sides / "src" / "state.db")
    for extra in ("--dry-run", "--prepare", None):
        result = cw(sides, *migrate("src", "dst", *([extra] if extra else [])))
        assert result.code == 2, (extra, result)
        assert result.err.startswith("error: dst holds state of its own for 2 job(s)"), result
        assert "fails (state dead_lettered, 1 run record(s))" in result.err, result
        assert "sync (state succeeded, last success " in result.err, result
        assert "moved" not in result.stdout, result
        after = records(sides / "dst" / "state.db"), records(sides / "src" / "state.db")
        assert after == before, extra


def test_the_dry_run_plans_what_the_move_does_and_creates_nothing(sides: Path) -> None:
    """On a destination that does not exist yet the dry run and ``--verify`` create no file;
    the dry run's counts are the move's (``fails`` has no status on the source: 0 both)."""
    dry = cw(sides, *migrate("src", "fresh", "--dry-run"))
    assert dry.code == 0, dry
    assert "fresh/state.db and " in dry.stderr and "not created; read as empty" in dry.stderr
    early = cw(sides, *migrate("src", "fresh", "--verify"))
    assert early.code == 1, early  # nothing moved yet: every job differs
    assert list((sides / "fresh").iterdir()) == []
    planned = [
        line.split(": would move ")[1].split(", forward")[0]
        for line in dry.stdout.splitlines()
        if ": would move " in line
    ]
    moved = cw(sides, *migrate("src", "fresh"))
    assert moved.code == 0, moved
    done = {
        line.split(":")[0]: line.split("(")[1].split(")")[0]
        for line in moved.stdout.splitlines()
        if ": moved (" in line
    }
    assert planned == [
        "status 0, run 0, item 0, outbox 0, dead letters 0",
        "status 1, run 1, item 0, outbox 0, dead letters 0",
    ], dry
    assert done == {
        "fails": "run 0, item 0, outbox 0, status 0; dead letters 0",
        "sync": "run 1, item 0, outbox 0, status 1; dead letters 0",
    }, moved
    verified = cw(sides, *migrate("src", "fresh", "--verify"))
    assert verified.code == 0, verified


def test_a_prepared_destination_and_migrating_back_are_not_refused(sides: Path) -> None:
    """``--prepare`` first (the destination's own fires wait): the move goes through; the
    job then runs on there, and moving it back overwrites the state the source left behind
    (retired by the first move), not the destination's own."""
    assert cw(sides, *migrate("src", "dst", "--prepare")).code == 0
    moved = cw(sides, *migrate("src", "dst"))
    assert moved.code == 0 and "moved 2 job(s) from src to dst" in moved.stdout, moved
    trigger(sides, "dst", "sync", "2026-01-01T13:00:00Z")
    back = cw(sides, *migrate("dst", "src"))
    assert back.code == 0 and "moved 2 job(s) from dst to src" in back.stdout, back
    status = cw(sides, "status", "--jobs", "jobs.py", "-o", "json", env=on(sides, "src"))
    assert '"last_success_window": "2026-01-01T13:00:00Z"' in status.stdout, status


def test_a_destination_whose_watcher_only_checked_the_jobs_is_not_refused(sides: Path) -> None:
    """``dst``'s watcher ran before the move (``check``: the jobs never ran there, alerts
    recorded): that is no state of its own, and the source's replaces it."""
    assert cw(sides, "run", "--jobs", "jobs.py", "--once", env=on(sides, "dst")).code in (0, 1)
    with sqlite3.connect(sides / "dst" / "state.db") as db:
        db.execute("DELETE FROM records")  # a state made, as if it never ran the jobs
    checked = cw(sides, "check", "--jobs", "jobs.py", env=on(sides, "dst"))
    assert checked.code in (0, 1), checked
    assert any(kind == "status" for kind, *_ in records(sides / "dst" / "state.db"))
    moved = cw(sides, *migrate("src", "dst"))
    assert moved.code == 0 and "moved 2 job(s) from src to dst" in moved.stdout, moved


def test_one_store_given_as_both_sides_is_refused_and_keeps_its_dead_letter(
    tmp_path: Path,
) -> None:
    """The same SQLite file, once absolute and once relative: exit 2 before anything is
    opened; its dead letter is still there."""
    write_jobs(tmp_path / "jobs.py", JOBS)
    here = {"CRONWARDEN_LOCAL_PATH": str(tmp_path / ".cronwarden" / "state.db")}
    ran = cw(tmp_path, "trigger", "--jobs", "jobs.py", "fails", env=here)
    assert ran.code == 1, ran
    (tmp_path / "a.env").write_text(f"CRONWARDEN_LOCAL_PATH={tmp_path}/.cronwarden/state.db\n")
    (tmp_path / "b.env").write_text("CRONWARDEN_LOCAL_PATH=.cronwarden/state.db\n")
    result = cw(tmp_path, *migrate("a", "b"))
    assert result.code == 2, result
    assert result.err == (
        f"error: --from and --to are the same store (local {tmp_path.resolve()}"
        "/.cronwarden/state.db); nothing to move"
    ), result
    letters = cw(tmp_path, "dlq", "list", "--jobs", "jobs.py", "-o", "json", env=here)
    assert letters.code == 0 and '"fails"' in letters.stdout, letters


def test_one_postgres_database_given_as_both_sides_is_refused_without_its_password(
    tmp_path: Path,
) -> None:
    """Two spellings of one DSN (URL and key=value, host case): refused before connecting
    (no server here), naming host, port, database and schema, never the password."""
    pytest.importorskip("cronwarden.adapters.postgres.settings")
    write_jobs(tmp_path / "jobs.py", JOBS)
    (tmp_path / "a.env").write_text(
        "CRONWARDEN_POSTGRES_DSN=postgresql://u:hunter2@DB.invalid:5432/prod\n"
    )
    (tmp_path / "b.env").write_text(
        "CRONWARDEN_POSTGRES_DSN='host=db.invalid user=u password=other dbname=prod'\n"
    )
    args = migrate("a", "b")
    args[args.index("--from") + 1] = args[args.index("--to") + 1] = "postgres"
    result = cw(tmp_path, *args)
    assert result.code == 2, result
    assert result.err == (
        "error: --from and --to are the same store (postgres db.invalid:5432/prod schema "
        "cronwarden); nothing to move"
    ), result
    assert "hunter2" not in result.stderr + result.stdout
    assert "other" not in result.stderr + result.stdout


@pytest.mark.parametrize("wait", ["inf", "1e300", "nan", "-inf"])
def test_a_wait_that_is_no_finite_number_of_seconds_is_bad_input(sides: Path, wait: str) -> None:
    result = cw(sides, *migrate("src", "fresh", "--wait", wait))
    assert result.code == 2, result
    assert result.err.startswith("error: --wait must be 0 or more seconds, got "), result
    assert "Traceback" not in result.stderr
    assert list((sides / "fresh").iterdir()) == []
