"""Cold start: import times in fresh interpreters (median of several), run from a neutral
directory so the installed package is what gets imported.

* ``import cronwarden``: goal ≤ 30 ms, and no cloud SDK module loaded (``sys.modules`` diff).
* Each entrypoint (the rendered GCP ``main.py``, the Azure ``function_app.py``, the AWS
  ``handler.py``) as the delta over its SDKs alone: the entrypoint's import time once its SDKs
  are loaded, in the same fresh process (``entrypoint_after_sdks``; the goal, ≤ +50 ms). The
  fresh-process totals with and without it are context (noisier: two populations of processes).
  ``*_cpu``: the same spans in CPU time of the process, less sensitive to a shared machine.
* ``first_worker_request``: what a worker's first request imports on top (the engine, the
  worker, the alerting settings its job pings read; no connection is made), in the same
  process after the entrypoint. The entrypoint leaves it out because a trigger's, a worker's
  and a watcher's first requests need different parts; a worker's cold start pays both.

By hand, per module: ``python -X importtime -c "import <sdks>; import <entrypoint>"`` in a
folder holding the entrypoint and its jobs module (the tree under the entrypoint's line).
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
CLOUD_PREFIXES = (
    "google",
    "azure",
    "grpc",
    "functions_framework",
    "flask",
    "proton",
    "werkzeug",
    "boto3",
    "botocore",
)
#: what a worker's first request imports after the entrypoint (``HostedRuntime.worker``)
FIRST_WORKER_REQUEST = [
    "cronwarden.hosting._invocation",
    "cronwarden.watch.alerting.settings",
    "cronwarden.watch.alerting.watchdog",
]

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
    "aws": {
        "file": "handler.py",
        "module": "handler",
        "source": (
            "from cronwarden.adapters.aws.functions import make_handlers\n\n"
            "import bench_jobs as jobs_module\n\n"
            "trigger, worker, watcher = make_handlers(jobs_module)\n"
        ),
        "sdks": ["boto3"],
    },
}

PROBE = textwrap.dedent(
    """\
    import importlib, json, sys, time
    first, then, after = {first!r}, {then!r}, {after!r}
    before = set(sys.modules)
    t0, c0 = time.perf_counter(), time.process_time()
    for name in first:
        importlib.import_module(name)
    t1, c1 = time.perf_counter(), time.process_time()
    for name in then:
        importlib.import_module(name)
    t2, c2 = time.perf_counter(), time.process_time()
    new = sorted(set(sys.modules) - before)
    for name in after:
        importlib.import_module(name)
    t3, c3 = time.perf_counter(), time.process_time()
    print(json.dumps({{"first": t1 - t0, "then": t2 - t1, "total": t2 - t0, "after": t3 - t2,
                      "then_cpu": c2 - c1, "after_cpu": c3 - c2, "modules": new}}))
    """
)


def _probe(
    first: list[str], then: list[str], cwd: str, after: list[str] | None = None
) -> dict[str, Any]:
    """Import ``first``, then ``then`` (timed apart; ``modules``: what both loaded), then
    ``after``, in one fresh interpreter."""
    code = PROBE.format(first=first, then=then, after=after or [])
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
            both = [
                _probe(spec["sdks"], [spec["module"]], folder, FIRST_WORKER_REQUEST)
                for _ in range(repeats)
            ]
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
            "entrypoint_after_sdks_cpu": summary([r["then_cpu"] for r in both]),
            "first_worker_request": summary([r["after"] for r in both]),
            "first_worker_request_cpu": summary([r["after_cpu"] for r in both]),
            "entrypoint_alone_cloud_modules": _cloud(bare["modules"]),
            "entrypoint_alone": bare["then"],
        }
    return results


if __name__ == "__main__":  # python -m tests.bench.coldstart [--quick]
    quick = "--quick" in sys.argv
    found = measure(list(ENTRYPOINTS), repeats=3 if quick else REPEATS)
    for target, row in found.items():
        if "entrypoint_after_sdks" in row:
            print(
                f"{target}: entrypoint +{row['entrypoint_after_sdks']['median'] * 1000:.1f} ms "
                f"({row['entrypoint_after_sdks_cpu']['median'] * 1000:.1f} ms CPU) over its "
                f"SDKs; a worker's first request imports "
                f"+{row['first_worker_request']['median'] * 1000:.1f} ms "
                f"({row['first_worker_request_cpu']['median'] * 1000:.1f} ms CPU) more"
            )
        else:
            print(f"{target}: {json.dumps(row)[:300]}")
