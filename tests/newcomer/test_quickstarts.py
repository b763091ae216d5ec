"""Every quickstart runs as written on a fresh clone: the README's set-up and
docs/quickstart-*.md, each in a fresh copy of the checkout, from a shell without this test's
virtualenv, with the page's shell blocks unchanged (markers: :mod:`.as_written`).

``python3`` is the interpreter the tests' virtualenv was made from (a shim first on PATH); pip's
cache is shared.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from . import as_written
from .conftest import ROOT, copy_checkout, python3_shim, venv_without_this_one

QUICKSTARTS = sorted(path.name for path in (ROOT / "docs").glob("quickstart-*.md"))
README_SECTION = "## Set-up on a fresh machine"


def shell_env(tmp_path: Path) -> dict[str, str]:
    """A newcomer's shell: no virtualenv, no cronwarden settings, ``python3`` this Python."""
    shims = python3_shim(tmp_path / "shims")
    env = venv_without_this_one()
    env["PATH"] = f"{shims}:{env.get('PATH', '')}"
    return env


def verdict(stdout: str) -> dict[str, object]:
    """The ``cronwarden run --once`` verdict line (JSON, as stdout is not a terminal)."""
    line = next((line for line in stdout.splitlines() if line.startswith('{"result"')), None)
    assert line, stdout[-3000:]
    found: dict[str, object] = json.loads(line)
    return found


def run_page(tmp_path: Path, markdown: str, timeout: float) -> tuple[Path, str]:
    clone = copy_checkout(tmp_path / "clone")
    page = as_written.steps(markdown)
    done = as_written.run(page, clone, shell_env(tmp_path), timeout)
    assert done.returncode == 0, done.stdout[-3000:] + "\n" + done.stderr[-3000:]
    assert "command not found" not in done.stderr, done.stderr[-3000:]
    for pgid in as_written.started(clone):
        assert not as_written.alive(pgid), f"process group {pgid} outlived the page"
    return clone, done.stdout


def test_the_quickstarts_are_all_found() -> None:
    assert QUICKSTARTS == ["quickstart-azure.md", "quickstart-gcp.md"]
    for name in QUICKSTARTS:
        page = as_written.steps((ROOT / "docs" / name).read_text())
        assert [step.mode for step in page] == ["run"], name
        assert any(line.startswith("pip install ") for line in page[0].commands), name
    readme = as_written.steps(as_written.section((ROOT / "README.md").read_text(), README_SECTION))
    assert [step.mode for step in readme] == ["run", "skip"]
    assert readme[1].commands == ("nox -s tests",)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_setup_runs_as_written(tmp_path: Path) -> None:
    section = as_written.section((ROOT / "README.md").read_text(), README_SECTION)
    _, stdout = run_page(tmp_path, section, timeout=840)
    result = verdict(stdout)
    assert result["result"] == "ok" and str(result["message"]).endswith("run(s) succeeded")


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", QUICKSTARTS)
def test_the_quickstart_runs_as_written(tmp_path: Path, name: str) -> None:
    cloud = name.removeprefix("quickstart-").removesuffix(".md")
    if cloud == "gcp":
        from cronwarden.emulators.gcp._sdk import missing_reason

        reason = missing_reason("pubsub") or missing_reason("firestore")
    else:
        reason = None if shutil.which("node") else "node is not on PATH (Azurite)"
    if reason:
        pytest.skip(reason)
    clone, stdout = run_page(tmp_path, (ROOT / "docs" / name).read_text(), timeout=840)
    result = verdict(stdout)
    assert result["result"] == "ok" and str(result["message"]).endswith("run(s) succeeded")
    assert stdout.splitlines()[-1] == f"stopped: {cloud} emulators"
    assert not (clone / ".cronwarden" / f"emulators-{cloud}.pid").exists()
