"""Cold start: import times in fresh interpreters (median of several), run from a neutral
directory so the installed package is what gets imported.

* ``import cronwarden``: goal ≤ 30 ms, and no cloud SDK module loaded (``sys.modules`` diff).
* Each entrypoint (the rendered GCP ``main.py``, the Azure ``function_app.py``) as the delta over
  its SDKs alone: T(import the SDKs, then the entrypoint) - T(import the SDKs), each in fresh
  processes. Goal ≤ +50 ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from typing import Any

from .stats import summary

REPEATS = 9
CLOUD_PREFIXES = ("google", "azure", "grpc", "functions_framework", "flask", "proton", "werkzeug")

JOBS = """\
import cronwarden


@cronwarden.job("nightly", cron="0 2 * * *", max_runtime="30m")
def nightly(ctx):
    for item in ctx.items(range(10)):
        pass
"""

ENTRYPOINTS: dict[str, dict[str, Any]] = {
    "gcp": {
        "file": "main.py",
        "module": "main",
        "source": (
            "from cronwarden.adapters.gcp.functions import make_functions\n\n"
            "import bench_jobs as jobs_module\n\n"
            "trigger, worker, watcher = make_functions(jobs_module)\n"
        ),
        "sdks": ["functions_framework", "google.cloud.firestore", "google.cloud.pubsub_v1"],
    },
    "azure": {
        "file": "function_app.py",
        "module": "function_app",
        "source": (
            "from cronwarden.adapters.azure.functions import build_app\n\n"
            "import bench_jobs as jobs_module\n\n"
            "app = build_app(jobs_module)\n"
        ),
        "sdks": ["azure.functions", "azure.servicebus", "azure.data.tables"],
    },
}

PROBE = textwrap.dedent(
    """\
    import importlib, json, sys, time
    first, then = {first!r}, {then!r}
    before = set(sys.modules)
    t0 = time.perf_counter()
    for name in first:
        importlib.import_module(name)
    t1 = time.perf_counter()
    for name in then:
        importlib.import_module(name)
    t2 = time.perf_counter()
    new = sorted(set(sys.modules) - before)
    print(json.dumps({{"first": t1 - t0, "then": t2 - t1, "total": t2 - t0, "modules": new}}))
    """
)


def _probe(first: list[str], then: list[str], cwd: str) -> dict[str, Any]:
    code = PROBE.format(first=first, then=then)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = cwd
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"import probe failed: {out.stderr.strip()[-800:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _cloud(modules: list[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules if m.startswith(CLOUD_PREFIXES)})


def measure(targets: list[str], repeats: int = REPEATS) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="cw-bench-cold-")
    with open(os.path.join(folder, "bench_jobs.py"), "w") as handle:
        handle.write(JOBS)
    results: dict[str, Any] = {}
    runs = [_probe([], ["cronwarden"], folder) for _ in range(repeats)]
    results["import cronwarden"] = {
        "seconds": summary([r["then"] for r in runs]),
        "cloud_modules": _cloud(runs[0]["modules"]),
        "modules_loaded": len(runs[0]["modules"]),
    }
    core = ["cronwarden", "cronwarden.jobs", "cronwarden.run.engine", "cronwarden.hosting.trigger"]
    runs = [_probe([], core, folder) for _ in range(repeats)]
    results["worker core"] = {
        "what": "import cronwarden + jobs, engine, trigger (what any worker loads)",
        "seconds": summary([r["then"] for r in runs]),
        "cloud_modules": _cloud(runs[0]["modules"]),
    }
    for name in targets:
        spec = ENTRYPOINTS[name]
        with open(os.path.join(folder, spec["file"]), "w") as handle:
            handle.write(spec["source"])
        try:
            alone = [_probe(spec["sdks"], [], folder) for _ in range(repeats)]
            both = [_probe(spec["sdks"], [spec["module"]], folder) for _ in range(repeats)]
            bare = _probe([], [spec["module"]], folder)
        except RuntimeError as exc:
            results[name] = {"error": str(exc)}
            continue
        sdk_s = summary([r["total"] for r in alone])
        both_s = summary([r["total"] for r in both])
        results[name] = {
            "entrypoint": spec["file"],
            "sdks": spec["sdks"],
            "sdks_alone": sdk_s,
            "sdks_and_entrypoint": both_s,
            "delta": both_s["median"] - sdk_s["median"],
            "entrypoint_after_sdks": summary([r["then"] for r in both]),
            "entrypoint_alone_cloud_modules": _cloud(bare["modules"]),
            "entrypoint_alone": bare["then"],
        }
    return results
