"""docs/quickstart-gcp.md and docs/quickstart-azure.md, run as written: a fresh venv, the
install, the emulators, the example job, the stop. The one change: ``pip install
'cronwarden[...]'`` installs this working tree (``'<repo>[...]'``), not the released package."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT


def commands_of(doc: Path) -> list[str]:
    """The first ```bash block of ``doc``, one command per line."""
    block = re.search(r"```bash\n(.*?)```", doc.read_text(), re.S)
    assert block, f"{doc} has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("cloud", ["gcp", "azure"])
def test_the_quickstart_runs_as_written(tmp_path: Path, cloud: str) -> None:
    if cloud == "gcp":
        from cronwarden.emulators.gcp._sdk import missing_reason

        reason = missing_reason("pubsub") or missing_reason("firestore")
    else:
        reason = None if shutil.which("node") else "node is not on PATH (Azurite)"
    if reason:
        pytest.skip(reason)
    commands = commands_of(ROOT / "docs" / f"quickstart-{cloud}.md")
    assert len(commands) == 5
    assert commands[1] == f"pip install 'cronwarden[{cloud},emulators]'"
    commands[1] = f"pip install -q '{ROOT}[{cloud},emulators]'"
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "nightly_export.py", tmp_path / "examples")
    script = "set -e\n" + "\n".join(commands) + "\n"
    base = os.path.dirname(sys.executable)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CRONWARDEN_", "PUBSUB_", "FIRESTORE_", "AZURE_", "VIRTUAL_ENV"))
    }
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != base)
    env["PYTHON"] = sys.executable
    done = subprocess.run(
        ["bash", "-c", script.replace("python3 -m venv", f"{sys.executable} -m venv", 1)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    verdict = json.loads(next(line for line in lines if line.startswith('{"result"')))
    assert verdict["result"] == "ok" and verdict["message"].endswith("run(s) succeeded")
    assert lines[-1] == f"stopped: {cloud} emulators"
    assert not (tmp_path / ".cronwarden" / f"emulators-{cloud}.pid").exists()
