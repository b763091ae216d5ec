"""Fixtures of the deploy tests: rendered examples (once per session) and the provider schemas."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cronwarden.deploy.render import Rendered, render

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
#: name => (provider, example module, watcher provider); GCP_WORKER: cases rendered with
#: --gcp-worker (the nightly example runs 15 minutes: longer than a push delivery allows)
CASES = {
    "gcp-quarter-hourly": ("gcp", "quarter_hourly.py", None),
    "gcp-nightly-pull": ("gcp", "nightly_export.py", None),
    "azure-nightly": ("azure", "nightly_export.py", None),
    "gcp-quarter-hourly-azure-watcher": ("gcp", "quarter_hourly.py", "azure"),
    "azure-quarter-hourly-gcp-watcher": ("azure", "quarter_hourly.py", "gcp"),
    "gcp-quarter-hourly-aws-watcher": ("gcp", "quarter_hourly.py", "aws"),
    "azure-quarter-hourly-aws-watcher": ("azure", "quarter_hourly.py", "aws"),
}
GCP_WORKER = {"gcp-nightly-pull": "pull"}


def terraform_or_skip() -> str:
    found = shutil.which("terraform")
    if found is None:
        pytest.skip("terraform is not installed (the fmt/validate checks need the binary)")
    os.environ["CHECKPOINT_DISABLE"] = "1"
    return found


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendered]:
    """Every example case rendered once."""
    out = tmp_path_factory.mktemp("rendered")
    return {
        name: render(
            provider,
            str(EXAMPLES / module),
            out / name,
            watcher_provider=watcher,
            gcp_worker=GCP_WORKER.get(name),
        )
        for name, (provider, module, watcher) in CASES.items()
    }


@pytest.fixture(scope="session")
def schemas() -> object:
    """The pinned provider schemas, installed with npm into the cache on first use."""
    from cronwarden.deploy.schema import Schemas, ensure_installed

    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (the schema check installs the provider schemas)")
    return Schemas(ensure_installed())
