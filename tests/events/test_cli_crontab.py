"""``cronwarden inventory`` and ``cronwarden import-crontab`` on a realistic crontab, and the
generated module run through the real engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import cronwarden
from cronwarden.jobs.config import load_jobs
from cronwarden.testing import run_once

REAL_WORLD = r"""# m h  dom mon dow   command
SHELL=/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin
MAILTO=ops@example.com
DB_PASSWORD=correct-horse-battery
CRON_TZ=Europe/Berlin
0 2 * * * echo "export $GREETING" ; test -n "$DB_PASSWORD"
30 2 * * * echo report
*/10 * * * * echo poll
0 0 1,15 * mon echo invoices
@weekly echo rotate; exit 4
15 4 * * * cat%first line%second\%line
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from cronwarden.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def crontab(tmp_path: Path) -> Path:
    path = tmp_path / "crontab"
    path.write_text(REAL_WORLD + 'GREETING=hello\n0 5 * * * echo "$GREETING"\n')
    return path


def test_inventory_lists_every_line_and_what_needs_a_decision(crontab: Path) -> None:
    result = _cli("inventory", str(crontab))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "7 schedule line(s)" in out
    assert "line 5: DB_PASSWORD=***  (a secret: set it on the worker)" in out
    assert "correct-horse-battery" not in out
    assert "schedule: At 02:00 every day (Europe/Berlin)" in out
    assert "@weekly = 0 0 * * 0" in out
    assert "[chained] starts 30 min after line 7" in out
    assert "[dom-or-dow]" in out and "[percent]" in out
    assert "input:    'first line\\nsecond%line\\n'" in out
    assert "7 line(s) translate, 0 cannot, 4 need a decision" in out
    assert "[chained] starts 45 min after line 12" in out
    assert out.count("next:     ") == 7


def test_inventory_exits_1_naming_what_cannot_be_translated(tmp_path: Path) -> None:
    path = tmp_path / "crontab"
    path.write_text("@reboot /opt/start.sh\n0 3 * * * /bin/true\n")
    result = _cli("inventory", str(path), "--timezone", "UTC")
    assert result.returncode == 1
    assert "cannot translate: @reboot runs when a machine boots" in result.stdout
    assert "1 line(s) translate, 1 cannot" in result.stdout


def test_import_refuses_untranslatable_lines_and_writes_nothing(tmp_path: Path) -> None:
    path, out = tmp_path / "crontab", tmp_path / "jobs.py"
    path.write_text("@reboot /opt/start.sh\n5/15 * * * * /bin/true\n0 3 * * * /bin/true\n")
    result = _cli("import-crontab", str(path), "--out", str(out), "--timezone", "UTC")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: line 1: @reboot runs when a machine boots")
    assert lines[1].startswith("error: line 2: minute '5/15': crons disagree on a single value")
    assert not out.exists()
    skipped = _cli(
        "import-crontab",
        str(path),
        "--out",
        str(out),
        "--timezone",
        "UTC",
        "--skip",
        "1",
        "--skip",
        "2",
    )
    assert skipped.returncode == 0, skipped.stderr
    text = out.read_text()
    assert "# line 1: skipped at import (--skip 1)" in text
    assert len(load_jobs(str(out))) == 1


def test_import_writes_a_module_whose_jobs_run_the_commands_unchanged(
    crontab: Path, tmp_path: Path
) -> None:
    out = tmp_path / "jobs.py"
    result = _cli("import-crontab", str(crontab), "--out", str(out), "--max-runtime", "5m")
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout and "7 job(s)" in result.stdout
    source = out.read_text()
    assert "correct-horse-battery" not in source  # secrets stay out of the module
    jobs = load_jobs(str(out))
    assert sorted(j.name for j in jobs) == [
        "cat",
        "echo-l10",
        "echo-l11",
        "echo-l14",
        "echo-l7",
        "echo-l8",
        "echo-l9",
    ]
    by_line = {j.description.split(":")[0]: j for j in jobs}
    daily = by_line["crontab line 7"]
    assert (daily.schedule.cron, daily.schedule.timezone) == ("0 2 * * *", "Europe/Berlin")
    assert daily.owner == "ops@example.com" and daily.max_runtime.total_seconds() == 300
    assert daily.retry.max_attempts == 1 and daily.overlap.value == "skip"
    assert by_line["crontab line 10"].schedule.cron == "0 0 1,15 * 1"

    # the secret is required from the worker's environment, not written into the module
    missing = run_once(daily, "2026-01-20T01:00Z")
    assert missing.kind is cronwarden.OutcomeKind.DEAD_LETTERED
    assert "DB_PASSWORD is not set" in missing.detail


def test_generated_jobs_succeed_fail_and_feed_stdin(
    crontab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "jobs.py"
    assert _cli("import-crontab", str(crontab), "--out", str(out)).returncode == 0
    monkeypatch.setenv("DB_PASSWORD", "from-the-vault")
    by_line = {j.description.split(":")[0]: j for j in load_jobs(str(out))}
    daily = run_once(by_line["crontab line 7"], "2026-01-20T01:00Z")
    assert daily.kind is cronwarden.OutcomeKind.SUCCEEDED, daily.detail
    assert daily.counters["command_output_bytes"] == len("export \n")  # GREETING comes later
    greeting = run_once(by_line["crontab line 14"], "2026-01-20T04:00Z")
    assert greeting.counters["command_output_bytes"] == len("hello\n")
    weekly = run_once(by_line["crontab line 11"], "2026-01-25T00:00+01:00")
    assert weekly.kind is cronwarden.OutcomeKind.DEAD_LETTERED
    assert "command exited with status 4; output tail: rotate" in weekly.detail
    cat = run_once(by_line["crontab line 12"], "2026-01-20T04:15+01:00")
    assert cat.kind is cronwarden.OutcomeKind.SUCCEEDED
    assert cat.counters["command_output_bytes"] == len("first line\nsecond%line\n")


def test_import_does_not_overwrite_without_force(crontab: Path, tmp_path: Path) -> None:
    out = tmp_path / "jobs.py"
    out.write_text("# mine\n")
    result = _cli("import-crontab", str(crontab), "--out", str(out))
    assert result.returncode == 2 and "exists" in result.stderr
    assert out.read_text() == "# mine\n"


def test_import_refuses_bad_options_and_empty_crontabs(tmp_path: Path) -> None:
    path, out = tmp_path / "crontab", tmp_path / "jobs.py"
    path.write_text("0 3 * * * /bin/true\n")
    bad = _cli(
        "import-crontab", str(path), "--out", str(out), "--timezone", "UTC", "--max-runtime", "soon"
    )
    assert bad.returncode == 2 and "cannot parse duration 'soon'" in bad.stderr
    attempts = _cli(
        "import-crontab", str(path), "--out", str(out), "--timezone", "UTC", "--max-attempts", "0"
    )
    assert (
        attempts.returncode == 2
        and "retry.max_attempts must be between 1 and 100" in attempts.stderr
    )
    empty = tmp_path / "empty"
    empty.write_text("# nothing\nMAILTO=a@b.c\n")
    none = _cli("import-crontab", str(empty), "--out", str(out), "--timezone", "UTC")
    assert none.returncode == 2 and "has no schedule line to import" in none.stderr
    assert not out.exists()


def test_import_names_every_line_apart_and_never_writes_over_its_crontab(
    tmp_path: Path,
) -> None:
    # a.sh twice makes "a-l1" and "a-l2": the name a-l2.sh's own line has already
    path, out = tmp_path / "crontab", tmp_path / "jobs.py"
    path.write_text("*/5 * * * * /opt/a.sh\n*/5 * * * * /opt/a.sh\n*/5 * * * * /opt/a-l2.sh\n")
    made = _cli("import-crontab", str(path), "--out", str(out), "--timezone", "UTC")
    assert made.returncode == 0, made.stderr
    assert "3 job(s)" in made.stdout
    jobs = load_jobs(str(out))
    assert len(jobs) == 3 and len({j.name for j in jobs}) == 3
    assert sorted(j.handler.__name__ for j in jobs) == ["a_l1", "a_l2", "a_l2_2"]
    before = path.read_text()
    over = _cli("import-crontab", str(path), "--out", str(path), "--timezone", "UTC", "--force")
    assert over.returncode == 2 and "is the crontab being read" in over.stderr
    assert path.read_text() == before


def test_inventory_refuses_a_number_of_runs_out_of_range(tmp_path: Path) -> None:
    path = tmp_path / "crontab"
    path.write_text("0 3 * * * /bin/true\n")
    for runs in ("0", "-3", "100000000"):
        result = _cli("inventory", str(path), "--timezone", "UTC", "--runs", runs)
        assert result.returncode == 2 and "--runs" in result.stderr, result.stderr


def test_a_six_field_line_and_a_system_line_in_a_user_crontab_are_flagged(tmp_path: Path) -> None:
    path = tmp_path / "crontab"
    path.write_text(
        "0 0 2 * * * /opt/six.sh\n15 3 * * * root /opt/sys.sh\n0 5 * * * /opt/plain.sh --x\n"
    )
    result = _cli("inventory", str(path), "--timezone", "UTC")
    assert result.returncode == 0, result.stderr
    assert "[six-fields] the command starts with '*'" in result.stdout
    assert "[user-field] the command starts with 'root'" in result.stdout
    plain = result.stdout.split("line 3:")[1]
    assert "six-fields" not in plain and "user-field" not in plain
