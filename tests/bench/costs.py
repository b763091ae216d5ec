"""Store round trips per run, counted (``Store.round_trips``), against the budget of DESIGN §3:
2 per happy-path run (claim, complete) + 1 per lease renewal + 1 per ledger batch."""

from __future__ import annotations

import math
import time
from datetime import timedelta
from typing import Any

from cronwarden import Engine, EngineSettings, JobSet, RunRequest
from cronwarden.engine import OutcomeKind

from .emulators import Emulators
from .jobs import make_job, windows
from .probe import Probe
from .stats import summary

LEDGER_ITEMS = 250
RENEW_SLEEP_S = 2.0


def _noop(ctx: Any) -> None:
    return None


def _ledger(ctx: Any) -> None:
    for _ in ctx.items(range(LEDGER_ITEMS)):
        pass


def _sleeper(ctx: Any) -> None:
    ctx.sleep(RENEW_SLEEP_S)


def _scenario(
    store: Any, name: str, handler: Any, settings: EngineSettings, repeats: int, **job: Any
) -> dict[str, Any]:
    jobs = JobSet([make_job(name, handler, **job)])
    engine = Engine(jobs, store, settings)
    probe = Probe(store)
    runs = []
    wins = windows(repeats + 1)
    engine.execute(RunRequest(name, wins[-1]))  # warm-up: clients, channels, table
    for window in wins[:repeats]:
        probe.reset()
        started = time.perf_counter()
        outcome = engine.execute(RunRequest(name, window))
        elapsed = time.perf_counter() - started
        if outcome.kind is not OutcomeKind.SUCCEEDED:
            raise RuntimeError(f"{name}: {outcome}")
        breakdown = probe.breakdown()
        renewals = breakdown.get("renewal", {}).get("calls", 0)
        batches = breakdown.get("ledger batch", {}).get("calls", 0)
        runs.append(
            {
                "round_trips": probe.total,
                "budget": 2 + renewals + batches,
                "renewals": renewals,
                "ledger_batches": batches,
                "breakdown": breakdown,
                "seconds": elapsed,
            }
        )
    return {
        "runs": runs,
        "round_trips": [r["round_trips"] for r in runs],
        "budget": [r["budget"] for r in runs],
        "within_budget": all(r["round_trips"] <= r["budget"] for r in runs),
        "breakdown": runs[-1]["breakdown"],
        "seconds": summary([r["seconds"] for r in runs]),
    }


def measure(emulators: Emulators, stores: list[str], repeats: int = 5) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in stores:
        with emulators.store(name) as store:
            batch = max(1, min(100, (store.max_commit_ops - 3) // 2))
            happy = _scenario(store, "bench-happy", _noop, EngineSettings(), repeats)
            ledger = _scenario(store, "bench-ledger", _ledger, EngineSettings(), repeats)
            ledger["items"] = LEDGER_ITEMS
            ledger["batch_size"] = batch
            ledger["expected_batches"] = math.ceil(LEDGER_ITEMS / batch)
            renew = _scenario(
                store,
                "bench-renew",
                _sleeper,
                EngineSettings(lease_margin=timedelta(seconds=2), renew_fraction=0.05),
                max(2, repeats // 2),
                max_runtime="10s",
            )
            results[name] = {"happy": happy, "ledger": ledger, "renewals": renew}
    return results
