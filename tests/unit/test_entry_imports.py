"""A function host's cold start imports what its first request needs, nothing more.

Each provider's rendered entry point (the GCP ``main.py``, the Azure ``function_app.py``, the AWS
``handler.py``) is imported in a fresh interpreter and ``sys.modules`` is checked: the engine,
the trigger and worker, the watcher, alerting, metrics and the faces load only when a request
needs them (issue #29, cold start). The second test shows they do load then: lazy, not gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

#: modules (and their submodules) an entry point must not import: the first request of some of
#: its functions loads them (engine and worker: trigger and worker requests; watcher: watcher
#: requests), the rest belongs to other hosts (CLI, dashboard, deploy, emulators, ops)
LAZY = (
    "cronwarden.run.engine",
    "cronwarden.run.claiming",
    "cronwarden.run.ledger",
    "cronwarden.hosting.trigger",
    "cronwarden.hosting._invocation",
    "cronwarden.watch",
    "cronwarden.ops",
    "cronwarden.cli",
    "cronwarden.dashboard",
    "cronwarden.deploy",
    "cronwarden.emulators",
    "cronwarden.testing",
    "click",
    "rich",
    "jinja2",
    "starlette",
    "pydantic",
    "opentelemetry",
    "prometheus_client",
)

JOBS = """\
import cronwarden


@cronwarden.job("nightly", cron="0 2 * * *", max_runtime="30m")
def nightly(ctx):
    pass
"""

#: the entry points exactly as ``cronwarden deploy render`` writes them (tests/deploy/golden)
ENTRIES = {
    "gcp": (
        "main",
        "from cronwarden.adapters.gcp.functions import make_functions\n"
        "import nightly_jobs as jobs_module\n"
        "trigger, worker, watcher = make_functions(jobs_module)\n",
    ),
    "azure": (
        "function_app",
        "from cronwarden.adapters.azure.functions import build_app\n"
        "import nightly_jobs as jobs_module\n"
        "app = build_app(jobs_module)\n",
    ),
    "aws": (
        "handler",
        "from cronwarden.adapters.aws.functions import make_handlers\n"
        "import nightly_jobs as jobs_module\n"
        "trigger, worker, watcher = make_handlers(jobs_module)\n",
    ),
}

PROBE = """
import json, sys
LAZY = {lazy!r}


def loaded():
    return sorted(m for m in sys.modules if any(m == x or m.startswith(x + ".") for x in LAZY))


{body}
"""


def _run(folder: Path, body: str) -> dict[str, Any]:
    """Run ``body`` (which prints one JSON line) in a fresh interpreter with ``folder`` on the
    path and no cronwarden setting from the caller's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRONWARDEN_", "PYTHON"))}
    env["PYTHONPATH"] = str(folder)
    code = PROBE.format(lazy=LAZY, body=textwrap.dedent(body))
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "nightly_jobs.py").write_text(JOBS)
    for module, source in ENTRIES.values():
        (tmp_path / f"{module}.py").write_text(source)
    return tmp_path


@pytest.mark.parametrize("provider", sorted(ENTRIES))
def test_the_entry_point_imports_only_what_the_first_request_needs(
    folder: Path, provider: str
) -> None:
    if provider == "azure" and not os.environ.get("CI"):
        pytest.importorskip("azure.functions", reason="the azure extra is not installed")
    module = ENTRIES[provider][0]
    found = _run(
        folder,
        f"""
        import {module}
        print(json.dumps({{"loaded": loaded(), "entry": {module!r} in sys.modules}}))
        """,
    )
    assert found["entry"] is True  # the probe did import it
    assert found["loaded"] == []


def test_what_was_left_out_loads_with_the_request_that_needs_it(folder: Path) -> None:
    """A worker builds the engine and the worker, not the watcher; a watcher builds the watcher.
    The deprecated ``PushWorker`` still answers at its old path."""
    found = _run(
        folder,
        f"""
        from cronwarden.adapters.gcp.functions import runtime_of
        from cronwarden.adapters.local import LocalProvider
        import main

        runtime = runtime_of(main.worker)
        runtime._provider = LocalProvider({str(folder / "state.db")!r})
        at_import = loaded()
        runtime.worker
        after_worker = loaded()
        runtime.watcher
        after_watcher = loaded()
        from cronwarden.adapters.gcp.functions import PushWorker
        from cronwarden.hosting.trigger import Worker
        assert issubclass(PushWorker, Worker)
        runtime.close()
        print(json.dumps({{"import": at_import, "worker": after_worker, "watcher": after_watcher}}))
        """,
    )
    assert found["import"] == []
    assert {"cronwarden.run.engine", "cronwarden.hosting.trigger"} <= set(found["worker"])
    assert "cronwarden.watch.watcher" not in found["worker"]
    assert "cronwarden.watch.watcher" in found["watcher"]
