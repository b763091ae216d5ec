"""checkov with cronwarden's policies (see run_checkov.py). checkov cannot share a virtualenv with
the test tools, so this runs only when ``$CRONWARDEN_CHECKOV`` (or ``checkov`` on PATH) points to
it; ``nox -s deploy_check`` always runs it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .run_checkov import run


@pytest.mark.slow
def test_checkov_passes_and_catches_missing_dead_letter_settings(tmp_path: Path) -> None:
    if not (os.environ.get("CRONWARDEN_CHECKOV") or shutil.which("checkov")):
        pytest.skip("checkov is not installed here: `nox -s deploy_check` runs it")
    assert run(tmp_path) == []
