"""``--help`` of every command and subcommand prints, exit 0, with no extra installed; what an
extra brings is asked for when a command runs, by one line naming the extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import venv_without_this_one

pytestmark = pytest.mark.slow

#: commands that reach the CLI through entry points or lazily loaded modules: the walk must
#: find them (a walk that silently finds less would pass for the wrong reason)
MUST_FIND = {
    ("dashboard",),
    ("deploy",),
    ("deploy", "render"),
    ("emulators",),
    ("emulators", "servicebus"),
    ("emulators", "pubsub"),
    ("emulators", "azurite"),
    ("emulators", "aws"),
    ("emulators", "postgres"),
    ("emulators", "up"),
    ("emulators", "down"),
    ("dlq", "redrive"),
}


def subcommands(help_text: str) -> list[str]:
    """The names listed under ``Commands:`` in click's help output."""
    names: list[str] = []
    lines = iter(help_text.splitlines())
    for line in lines:
        if line.strip() == "Commands:":
            break
    for line in lines:
        if not line.strip():
            break
        if line.startswith("  ") and not line.startswith("   "):
            names.append(line.split()[0])
    return names


def help_of(bin_dir: Path, path: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = venv_without_this_one() | {"COLUMNS": "200"}
    return subprocess.run(
        [str(bin_dir / "cronwarden"), *path, "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def test_every_help_prints_without_extras(base_venv: Path, tmp_path: Path) -> None:
    absent = subprocess.run(
        [str(base_venv / "python"), "-c", "import proton"], capture_output=True, timeout=60
    )
    assert absent.returncode != 0, "the base virtualenv must not have the [emulators] extra"
    seen: dict[tuple[str, ...], str] = {}
    todo: list[tuple[str, ...]] = [()]
    while todo:
        path = todo.pop()
        done = help_of(base_venv, path, tmp_path)
        assert done.returncode == 0, f"cronwarden {' '.join(path)} --help: {done.stderr[-2000:]}"
        assert "Usage: cronwarden" in done.stdout, done.stdout
        seen[path] = done.stdout
        todo.extend((*path, name) for name in subcommands(done.stdout))
    missing = MUST_FIND - set(seen)
    assert not missing, f"not listed by any --help: {sorted(missing)}"
    assert not (tmp_path / ".cronwarden").exists(), "--help must not create state"


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["emulators", "servicebus", "--port", "0"], "emulators"),
        (["emulators", "aws"], "emulators"),
        (["dashboard", "--jobs", "jobs.py"], "dashboard"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(
    base_venv: Path, tmp_path: Path, args: list[str], extra: str
) -> None:
    (tmp_path / "jobs.py").write_text("import cronwarden\n")
    done = subprocess.run(
        [str(base_venv / "cronwarden"), *args],
        capture_output=True,
        text=True,
        env=venv_without_this_one(),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2, done
    lines = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert len(lines) == 1, done.stderr
    assert f"pip install 'cronwarden[{extra}]'" in lines[0] and "Traceback" not in done.stderr


def test_a_plugin_that_cannot_import_still_helps(base_venv: Path, tmp_path: Path) -> None:
    """A command another package contributes (entry point ``cronwarden.commands``) whose import
    fails is listed, its ``--help`` prints, and running it names the package and the module."""
    site = tmp_path / "site"
    info = site / "cwplugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cwplugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[cronwarden.commands]\nshout = cwplugin:shout\n")
    (site / "cwplugin.py").write_text("import not_installed_module_xyz  # noqa\n")
    env = venv_without_this_one() | {"PYTHONPATH": str(site), "COLUMNS": "200"}

    def cw(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(base_venv / "cronwarden"), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )

    listing = cw("--help")
    assert listing.returncode == 0 and "shout" in subcommands(listing.stdout), listing
    helped = cw("shout", "--help")
    assert helped.returncode == 0 and "not_installed_module_xyz" in helped.stdout, helped
    ran = cw("shout", "loudly")
    assert ran.returncode == 2, ran
    assert ran.stderr.strip().splitlines() == [
        "error: `cronwarden shout` (from cwplugin) cannot import 'not_installed_module_xyz': "
        "install what cwplugin needs (No module named 'not_installed_module_xyz')"
    ]


def test_a_stand_in_for_an_extra_helps_and_names_it() -> None:
    from click.testing import CliRunner

    from cronwarden.cli.plugins import missing_extra

    stand_in = missing_extra("dashboard", "dashboard", ModuleNotFoundError(name="uvicorn"))
    helped = CliRunner().invoke(stand_in, ["--help"])
    assert helped.exit_code == 0 and "pip install 'cronwarden[dashboard]'" in helped.output
    ran = CliRunner().invoke(stand_in, ["--jobs", "x.py"])
    assert ran.exit_code != 0 and "needs the [dashboard] extra (uvicorn)" in ran.output


def test_the_emulator_commands_import_no_sdk_until_they_run() -> None:
    """With every extra installed (this virtualenv), loading the emulators' command modules —
    what ``--help`` does — imports none of the SDKs or servers they run."""
    probe = (
        "import importlib, json, sys\n"
        "before = set(sys.modules)  # .pth files may import namespace packages at start-up\n"
        "from cronwarden.emulators import cli\n"
        "for name in sorted(set(cli._COMMANDS.values())):\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stdout))
    heavy = {"proton", "moto", "flask", "azure", "google", "boto3", "botocore", "psycopg"}
    assert not loaded & heavy, sorted(loaded & heavy)
