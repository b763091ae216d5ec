"""Session fixtures for the newcomer tests: a fresh clone of this checkout, its wheel (built
once per session) and a virtualenv with only cronwarden's base dependencies.

A "fresh clone" is a copy of the files git tracks or would track (``git ls-files --cached
--others --exclude-standard``) as they are in the working tree: what a clone of the branch holds,
uncommitted edits included, without build output, state or virtualenvs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: the distribution's base dependencies (pyproject.toml ``dependencies``), no extra
BASE_DEPENDENCIES = ("cronsim", "tzdata", "click", "rich")


def copy_checkout(into: Path) -> Path:
    """Copy this checkout's tracked and trackable files into ``into`` (created); returns it."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: the docs are run from a clone")
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    into.mkdir(parents=True)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if not source.is_file():  # deleted in the working tree, not committed yet
            continue
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return into


def venv_without_this_one() -> dict[str, str]:
    """This process's environment minus its virtualenv and any cronwarden or emulator
    settings, the way a newcomer's shell starts. pip's cache (under ``$HOME``) stays shared."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("CRONWARDEN_", "PUBSUB_", "FIRESTORE_", "AZURE_", "AWS_", "VIRTUAL_ENV", "PYTHON")
        )
    }
    if sys.prefix != sys.base_prefix:  # leave the tests' own virtualenv off PATH
        ours = str(Path(sys.executable).parent)
        path = env.get("PATH", "").split(os.pathsep)
        env["PATH"] = os.pathsep.join(p for p in path if p != ours)
    return env


def python3_shim(folder: Path) -> Path:
    """``folder`` (created) holding ``python3``: the interpreter this test's virtualenv was made
    from, so a page that installs into ``python3`` without a virtualenv of its own fails as it
    would on a newcomer's machine, instead of installing into the tests' virtualenv."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = Path(sys.base_prefix) / "bin" / version
    folder.mkdir(parents=True)
    (folder / "python3").symlink_to(base if base.exists() else Path(sys.executable))
    return folder


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cronwarden's wheel, built once per session from a fresh copy of the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    source = copy_checkout(base / "src")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(base / "dist"), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = (base / "dist").glob("cronwarden-*.whl")
    return built


@pytest.fixture(scope="session")
def base_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Path]:
    """A virtualenv with the wheel and only its base dependencies; yields its ``bin``."""
    root = tmp_path_factory.mktemp("base-venv")
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q"]
    env = venv_without_this_one()
    for args in (["--no-deps", str(wheel)], list(BASE_DEPENDENCIES)):
        done = subprocess.run([*pip, *args], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    yield root / "bin"
    shutil.rmtree(root, ignore_errors=True)
