"""Store round trips per run, counted (``Store.round_trips``), against the budget in
docs/protocol.md ("Round trips"): 2 per happy-path run (claim, complete) + 1 per lease renewal
+ 1 per ledger batch. And the watcher's bill (:func:`watcher_costs`): billable reads and writes
per day of a watcher checking every minute, before (every status record per check) and after
(the due query; each job read and its ``watch_due`` written once per window), at list prices.

Scenarios: the scheduled run of a daily job's current window (the happy path), with a ledger,
with forced lease renewals; and a catch-up run of a past window (the engine then raises the
job's last success window as a maximum, which Table Storage applies by reading first)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwarden import Engine, EngineSettings, JobSet, RunRequest, job
from cronwarden.run.engine import OutcomeKind

from .emulators import Emulators
from .jobs import windows
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
    store: Any,
    label: str,
    handler: Any,
    settings: EngineSettings,
    repeats: int,
    *,
    catch_up: bool = False,
    max_runtime: str = "5m",
) -> dict[str, Any]:
    """``repeats`` runs (after one warm-up). A scheduled run is the current window of a daily
    job (one job per repeat: distinct run keys); a catch-up run is a past window of one job."""
    count = repeats + 1
    if catch_up:
        names = [label] * count
        jobs = JobSet([job(label, cron="* * * * *", max_runtime=max_runtime)(handler)])
        wins = windows(count)
    else:
        names = [f"{label}-{i}" for i in range(count)]
        jobs = JobSet(job(n, cron="0 0 * * *", max_runtime=max_runtime)(handler) for n in names)
        today = jobs[names[0]].schedule.floor(datetime.now(UTC))
        wins = [today] * count
    engine = Engine(jobs, store, settings)
    probe = Probe(store)
    reason = "catch_up" if catch_up else "schedule"
    engine.execute(RunRequest(names[-1], wins[-1], reason=reason))  # warm-up: clients, channels
    runs = []
    for name, window in zip(names[:repeats], wins[:repeats], strict=True):
        probe.reset()
        started = time.perf_counter()
        outcome = engine.execute(RunRequest(name, window, reason=reason))
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


CHECKS_PER_DAY = 24 * 60  #: a watcher every minute
WINDOWS_PER_DAY = 24  #: the fleet of the cost table: hourly jobs
STATUS_BYTES = 700  #: a healthy status record as the adapters store it (measured: 0.6-0.8 KB)
#: DynamoDB write units of the watcher's status write per look (one record under 1 KB): the
#: table's conditional ``PutItem`` (1: a commit of one record is a plain write, where a
#: ``TransactWriteItems`` bills 2), ``by-watch-due``'s delete and insert (its key moved: 2) and
#: ``by-kind``'s update (it projects every attribute: 1). Index writes are never transactional.
DYNAMODB_LOOK_WRITE_UNITS = 1 + 2 + 1


def watcher_costs(
    fleets: tuple[int, ...] = (100, 10_000, 100_000),
    windows_per_day: int = WINDOWS_PER_DAY,
) -> dict[str, list[dict[str, Any]]]:
    """Billable units per day and list-price dollars per month (30 days) of the watcher alone,
    per provider and fleet size, before and after the due query. A model of what the checks
    send, by the providers' billing rules (:mod:`.billing`), for a healthy fleet:

    * before: each check returns every status record (Firestore: a read each; Table Storage:
      a transaction per page of 1,000; DynamoDB: a read unit per 4 KB of the query's items);
    * after: each check sends the due query (Firestore: two queries, at least one read each;
      Table Storage: one page; DynamoDB: two index queries, at least one unit each) and every
      job is read once per window at its deadline and its ``watch_due`` written once (a
      document write; a transaction; :data:`DYNAMODB_LOOK_WRITE_UNITS`: a plain put of the
      item, the due index's delete and insert, the ``by-kind`` index's update).
    """
    from .billing import PRICES

    rows: dict[str, list[dict[str, Any]]] = {"firestore": [], "table": [], "dynamodb": []}
    for jobs in fleets:
        looks = jobs * windows_per_day  # each job read, and its watch_due written, per window
        pages = math.ceil(jobs / 1000)
        units = {
            "firestore": (
                {"reads": jobs * CHECKS_PER_DAY, "writes": 0},
                {"reads": 2 * CHECKS_PER_DAY + looks, "writes": looks},
            ),
            "table": (
                {"transactions": pages * CHECKS_PER_DAY},
                {"transactions": CHECKS_PER_DAY + looks},
            ),
            "dynamodb": (
                {"read_units": math.ceil(jobs * STATUS_BYTES / 4096) * CHECKS_PER_DAY},
                {
                    "read_units": 2 * CHECKS_PER_DAY + math.ceil(looks * STATUS_BYTES / 4096),
                    "write_units": looks * DYNAMODB_LOOK_WRITE_UNITS,
                },
            ),
        }
        for provider, (before, after) in units.items():
            prices = PRICES[provider]

            def monthly(day: dict[str, int], prices: dict[str, float] = prices) -> float:
                return sum(n * prices[unit] / 1e6 for unit, n in day.items()) * 30

            rows[provider].append(
                {
                    "jobs": jobs,
                    "before_per_day": before,
                    "after_per_day": after,
                    "before_usd_month": round(monthly(before), 2),
                    "after_usd_month": round(monthly(after), 2),
                }
            )
    return rows


def measure(emulators: Emulators, stores: list[str], repeats: int = 5) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in stores:
        with emulators.store(name) as store:
            batch = 100  # the engine's default batch: one ledger page each
            happy = _scenario(store, "bench-happy", _noop, EngineSettings(), repeats)
            catch_up = _scenario(
                store, "bench-catch-up", _noop, EngineSettings(), repeats, catch_up=True
            )
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
            results[name] = {
                "happy": happy,
                "catch_up": catch_up,
                "ledger": ledger,
                "renewals": renew,
            }
            watcher = watcher_costs().get(name)
            if watcher is not None:  # priced per operation
                results[name]["watcher_costs"] = watcher
    return results
