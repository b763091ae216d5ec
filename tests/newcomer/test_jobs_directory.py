"""``--jobs`` naming a directory says what it is, what is expected, and what inside it may be
meant, in one line with exit status 2 (it used to say the directory "does not exist")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import venv_without_this_one

JOB = """import cronwarden


@cronwarden.job("tick", cron="* * * * *", max_runtime="1m")
def tick(ctx):
    pass
"""
CLI = [sys.executable, "-c", "from cronwarden.cli import main; main()"]


def error_line(cwd: Path, jobs: str) -> str:
    done = subprocess.run(
        [*CLI, "status", "--jobs", jobs],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=venv_without_this_one() | {"CRONWARDEN_LOCAL_PATH": str(cwd / "state.db")},
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert done.returncode == 2 and len(lines) == 1, done
    return lines[0]


@pytest.mark.parametrize("jobs", ["app/", "./app", "app//"])
def test_a_package_directory_names_the_files_inside(tmp_path: Path, jobs: str) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "jobs.py").write_text(JOB)
    line = error_line(tmp_path, jobs)
    assert "is a directory" in line and "does not exist" not in line, line
    assert "a .py file" in line and "dotted module name" in line, line
    shown = jobs.rstrip("/")
    assert f"did you mean '{shown}/jobs.py' or '{shown}/__init__.py'?" in line, line


def test_a_plain_directory_says_what_is_expected(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    line = error_line(tmp_path, "scripts")
    assert "'scripts' is a directory" in line and "did you mean" not in line, line
    line = error_line(tmp_path, "scripts/")
    assert "'scripts/' is a directory" in line, line


def test_the_file_inside_it_works(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "jobs.py").write_text(JOB)
    done = subprocess.run(
        [*CLI, "run", "--jobs", "app/jobs.py", "--once", "--output", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=venv_without_this_one() | {"CRONWARDEN_LOCAL_PATH": str(tmp_path / "state.db")},
        timeout=120,
    )
    assert done.returncode == 0 and "run(s) succeeded" in done.stdout, done


def test_a_dotted_name_beside_the_shell_finds_the_module_in_the_working_directory(
    tmp_path: Path,
) -> None:
    """The installed ``cronwarden`` script (not ``python -c``, which puts the working directory
    on ``sys.path`` itself): ``--jobs jobs`` beside ``jobs.py`` imports it, as ``python -m``
    would; a module that is nowhere still fails with one line and exit status 2."""
    script = Path(sys.executable).parent / "cronwarden"
    if not script.exists():
        pytest.skip("the cronwarden console script is not installed in this environment")
    (tmp_path / "jobs.py").write_text(JOB)
    env = venv_without_this_one() | {"CRONWARDEN_LOCAL_PATH": str(tmp_path / "state.db")}
    done = subprocess.run(
        [str(script), "run", "--jobs", "jobs", "--once", "--output", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0 and "run(s) succeeded" in done.stdout, done
    missing = subprocess.run(
        [str(script), "status", "--jobs", "nosuch"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert missing.returncode == 2 and "cannot import job module 'nosuch'" in missing.stderr
