"""Run the benchmarks: ``python -m tests.bench [--json PATH] [--markdown PATH] [--only ...]``.

Writes the results as JSON and renders ``docs/benchmarks.md``. Every emulator is started on a
free 127.0.0.1 port and stopped (by process group) at the end, also on failure or SIGTERM.
``--quick`` shrinks every measurement (for debugging the harness; its numbers mean little).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
import traceback
from datetime import UTC, datetime
from typing import Any

from . import (
    billing,
    brokers,
    coldstart,
    costs,
    goals,
    latency,
    ledger,
    liveness,
    machine,
    peers,
    powertools,
    report,
    windows,
)
from .emulators import STORES, Emulators

NOTES = [
    "Round trips are counted, not timed: they do not depend on the machine's load. Timings on "
    "this shared 2-core machine do (see the load average above); compare ratios, not absolutes.",
    "Ledger marks are pages: one record per claimed batch (keys, fingerprints, states), written "
    "whole when the batch is claimed; its *done* marks ride in the next batch's page (the "
    "`carried` field), the last page's in the completion. Baseline (a) writes the same page "
    "records the same way with the store's SDK.",
    "Table Storage cannot raise a field to a maximum without reading it: a completion that must "
    "not lower the job's last success window (a past window: catch-up, backfill, a late retry, "
    "or a job whose interval is within `lease_margin` of its claim) reads the status first, one "
    "more round trip. The scheduled run of the current window writes it as a plain field.",
    "Baseline (b) on SQLite is two local autocommit transactions per item (WAL, synchronous=NORMAL,"
    " no fsync), tens of microseconds: 10x that would be faster than writing the records raw.",
    "Latency: every part runs in this process on loopback; the Azure Functions host is played by "
    "`cronwarden.adapters.azure.host.LocalHost` (Core Tools cannot run here).",
    "Cold start: the entrypoint delta is the entrypoint's own import time once its SDKs are loaded"
    " (same process); the fresh-process totals with and without it are context (noisier).",
]

SECTIONS = (
    "coldstart",
    "costs",
    "ledger",
    "latency",
    "liveness",
    "windows",
    "brokers",
    "dashboard",
    "powertools",
    "billing",
)
PROVIDERS = ("local", "gcp", "azure")


def _run(emulators: Emulators, section: str, stores: list[str], quick: bool) -> Any:
    if section == "coldstart":
        return coldstart.measure(
            list(coldstart.ENTRYPOINTS), repeats=3 if quick else coldstart.REPEATS
        )
    if section == "costs":
        return costs.measure(emulators, stores, repeats=2 if quick else 5)
    if section == "ledger":
        if quick:
            ledger.ITEMS.update({k: v // 5 for k, v in ledger.ITEMS.items()})
            ledger.PER_ITEM.update({k: v // 5 for k, v in ledger.PER_ITEM.items()})
        return ledger.measure(emulators, stores, repeats=1 if quick else ledger.REPEATS)
    if section == "latency":
        return latency.measure(emulators, list(PROVIDERS), samples=5 if quick else latency.SAMPLES)
    if section == "liveness":
        sizes = (10, 100, 1_000) if quick else liveness.SIZES
        return liveness.measure(emulators, stores, sizes, repeats=2 if quick else liveness.REPEATS)
    if section == "windows":
        sizes = (10, 100, 1_000) if quick else windows.SIZES
        return windows.measure(emulators, stores, sizes, repeats=2 if quick else windows.REPEATS)
    if section == "dashboard":
        from . import dashboard

        return dashboard.measure((100, 1_000) if quick else dashboard.SIZES, 2 if quick else 5)
    if section == "brokers":
        return brokers.measure(
            emulators,
            ["servicebus", "pubsub", *(["postgres"] if "postgres" in stores else [])],
            messages=200 if quick else brokers.MESSAGES,
            repeats=1 if quick else brokers.REPEATS,
        )
    if section == "billing":
        if quick:
            billing.LEDGER_ITEMS = 200
        return billing.measure(emulators, stores, repeats=1 if quick else 3)
    if section == "powertools":
        if quick:
            return powertools.measure(emulators, stores, runs=10, items=60, repeats=2)
        return powertools.measure(emulators, stores)
    raise ValueError(section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument(
        "--json", default=os.environ.get("CRONWARDEN_BENCH_JSON", "bench-results.json")
    )
    parser.add_argument(
        "--markdown", default=os.environ.get("CRONWARDEN_BENCH_MD", "docs/benchmarks.md")
    )
    parser.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--stores", nargs="*", choices=STORES, default=list(STORES))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    logging.getLogger("azure").setLevel(logging.ERROR)
    began = time.perf_counter()
    results: dict[str, Any] = {
        "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine.describe(),
        "quick": args.quick,
    }
    with Emulators() as emulators:
        for section in args.only:
            print(f"[bench] {section} …", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                results[section] = _run(emulators, section, args.stores, args.quick)
            except Exception as exc:
                traceback.print_exc()
                results[section] = {"error": {"error": f"{type(exc).__name__}: {exc}"}}
            print(
                f"[bench] {section}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True
            )
        results["emulator_startup_s"] = dict(emulators.startup_s)
    results["machine"]["load_avg_end"] = list(os.getloadavg())
    results["duration_s"] = time.perf_counter() - began
    results["goals"] = goals.judge(results)
    results["notes"] = NOTES
    for path, text in (
        (args.json, json.dumps(results, indent=1, default=str)),
        (args.markdown, peers.carried(args.markdown, report.render(results))),
    ):
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text + "\n")
    print(
        f"[bench] wrote {args.json} and {args.markdown} in {results['duration_s']:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
