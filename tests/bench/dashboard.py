"""The dashboard's overview at 1,000 and 10,000 jobs on the local store (SQLite), and page
weights. ``python -m tests.bench.dashboard`` runs it alone.

Timed through the ASGI app in process (Starlette's test client, no socket): the one query of
every status record, the full evaluation of the jobs that can be problems and of the rows
shown (the others are counted from their records), and the JSON encoding (``/api/overview``) or the
Jinja2 rendering (``/``) of the first page as served (problem jobs first, ``PAGE_SIZE`` rows);
``/api/overview?limit=N`` (every row in one answer) for comparison with the unpaged overview.
Weights are the bytes of each page as served (uncompressed) for the seeded fixture of the
dashboard's tests.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime
from typing import Any

from cronwarden import JobSet

from .liveness import _job, _seed
from .stats import summary

SIZES = (1_000, 10_000)
PAGE_SIZE = 100  #: cronwarden.dashboard.views.PAGE_SIZE (not imported: the dashboard extra)
REPEATS = 5


def _client(app: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    return TestClient(app, base_url="http://localhost")  # the dashboard serves only its Host names


def _overview(sizes: tuple[int, ...], repeats: int) -> list[dict[str, Any]]:
    from cronwarden.adapters.local import LocalProvider
    from cronwarden.dashboard import create_app

    rows = []
    with tempfile.TemporaryDirectory(prefix="cw-dash-bench-") as folder:
        provider = LocalProvider(os.path.join(folder, "state.db"))
        try:
            store, now, seeded = provider.store(), datetime.now(UTC), 0
            all_jobs = [_job(i) for i in range(max(sizes))]
            for size in sizes:
                _seed("sqlite", store, seeded, size, now)
                seeded = size
                app = create_app(JobSet(all_jobs[:size]), store, provider.queue())
                client = _client(app)
                row: dict[str, Any] = {"jobs": size}
                urls = (
                    ("api", "/api/overview"),
                    ("html", "/"),
                    ("api_all", f"/api/overview?limit={size}"),
                )
                for name, url in urls:
                    client.get(url)  # warm-up: templates, connections
                    times, cpu, weight = [], [], 0
                    for _ in range(repeats):
                        began, began_cpu = time.perf_counter(), time.process_time()
                        response = client.get(url)
                        times.append(time.perf_counter() - began)
                        cpu.append(time.process_time() - began_cpu)
                        weight = len(response.content)
                        if response.status_code != 200:
                            raise RuntimeError(f"{url}: HTTP {response.status_code}")
                    row[f"{name}_s"] = summary(times)
                    row[f"{name}_cpu_s"] = summary(cpu)  # less sensitive to a shared machine
                    row[f"{name}_bytes"] = weight
                row.update(_before_after(all_jobs[:size], store, provider.queue(), repeats))
                rows.append(row)
        finally:
            provider.close()
    return rows


def _before_after(jobs: list[Any], store: Any, queue: Any, repeats: int) -> dict[str, Any]:
    """The overview's first page as a view model (no HTTP, no encoding), in one run: judging
    every job (``full=True``, the overview before [scale]) and judging only the jobs that can
    be problems plus the rows shown (the default). The seeded records carry the watcher's
    ``watch_due``, as a fleet a watcher checks does."""
    from cronwarden.dashboard.views import Dashboard, overview

    now = datetime.now(UTC)
    dash = Dashboard(JobSet(jobs), store, queue, clock=lambda: now)
    out: dict[str, Any] = {}
    for name, full in (("view_full", True), ("view_fast", False)):
        overview(dash, full=full)  # warm-up
        times, cpu = [], []
        for _ in range(repeats):
            began, began_cpu = time.perf_counter(), time.process_time()
            overview(dash, full=full)
            times.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
        out[f"{name}_s"], out[f"{name}_cpu_s"] = summary(times), summary(cpu)
    return out


def _weights() -> dict[str, int]:
    """Bytes of each page of the tests' seeded fixture (7 jobs, 25 hourly windows each)."""
    from cronwarden.adapters.local import LocalProvider
    from cronwarden.dashboard import create_app
    from tests.dashboard import seed

    with tempfile.TemporaryDirectory(prefix="cw-dash-weights-") as folder:
        provider = LocalProvider(os.path.join(folder, "state.db"))
        try:
            seed.seed(provider.store(), provider.queue())
            app = create_app(
                seed.jobs(), provider.store(), provider.queue(), clock=lambda: seed.NOW
            )
            client = _client(app)
            pages = {
                "overview (7 jobs)": "/",
                "timeline (2 days, hourly)": "/jobs/failing",
                "run detail": "/jobs/failing/runs/2026-01-20T12:00Z",
                "dead letters": "/dead-letters",
                "style.css": "/static/style.css",
                "app.js": "/static/app.js",
                "openapi.json": "/api/openapi.json",
            }
            return {name: len(client.get(url).content) for name, url in pages.items()}
        finally:
            provider.close()


def measure(sizes: tuple[int, ...] = SIZES, repeats: int = REPEATS) -> dict[str, Any]:
    return {"overview": _overview(sizes, repeats), "weights": _weights()}


def _ms(row: dict[str, Any], name: str) -> str:
    wall, cpu = row[f"{name}_s"]["median"], row.get(f"{name}_cpu_s", {}).get("median")
    return f"{wall * 1000:.0f} ms" + ("" if cpu is None else f" ({cpu * 1000:.0f} ms CPU)")


def render(section: Any) -> list[str]:
    """The section of docs/benchmarks.md."""
    if not section or "overview" not in section:
        return []
    out = [
        "## Dashboard overview (local store, in process)",
        "",
        "Median wall time (CPU time of the process in brackets: the machine is shared). The "
        "first page as served (problem jobs first, "
        f"{PAGE_SIZE} rows), and every row in one answer for comparison.",
        "",
        "| jobs | /api/overview | bytes | / (HTML) | bytes | every row (?limit=N) | bytes |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in section["overview"]:
        every = (
            f"{_ms(row, 'api_all')} | {row['api_all_bytes']:,}" if "api_all_s" in row else "- | -"
        )
        out.append(
            f"| {row['jobs']:,} | {_ms(row, 'api')} | {row['api_bytes']:,} "
            f"| {_ms(row, 'html')} | {row['html_bytes']:,} | {every} |"
        )
    judged = [row for row in section["overview"] if "view_full_s" in row]
    if judged:
        out += [
            "",
            "The first page's view model (no HTTP), every job judged in full (before) and only "
            "the jobs that can be problems plus the rows shown (after), in one run:",
            "",
            "| jobs | every job judged | problems and shown rows judged |",
            "| ---: | ---: | ---: |",
        ]
        out += [
            f"| {row['jobs']:,} | {_ms(row, 'view_full')} | {_ms(row, 'view_fast')} |"
            for row in judged
        ]
    out += ["", "| page | bytes (uncompressed) |", "| --- | ---: |"]
    out += [f"| {name} | {size:,} |" for name, size in section["weights"].items()]
    return [*out, ""]


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    result = measure((100, 1_000) if quick else SIZES, 2 if quick else REPEATS)
    print(json.dumps(result, indent=1))
    print("\n".join(render(result)))
