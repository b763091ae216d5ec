"""AWS Powertools idempotency beside cronwarden, on the same moto DynamoDB table in the same run.

Powertools (``aws-lambda-powertools``, installed by ``nox -s bench`` only: not a runtime
dependency) writes its records into cronwarden's table (``key_attr="pk"``,
``sort_key_attr="sk"``, its own partition), so both pay the same server:

(a) **per run**: a handler wrapped with Powertools' ``@idempotent`` (keyed on the event's
    window) against the same handler run by cronwarden's engine for the same window (claim,
    run, completion), first delivery and a duplicate: time and DynamoDB calls per run, and
    the CPU time this process spends per delivery (the library and its boto3 client, without
    the emulator's server, another process: moto's cost is not DynamoDB's);
(b) **per item**: ``@idempotent_function`` called once per item against one cronwarden run
    iterating ``ctx.items()`` over the same items: items/s and DynamoDB calls per item.

DynamoDB calls are counted on the clients (a botocore ``before-call`` hook on Powertools'
client; ``Store.round_trips`` for cronwarden's), not timed; ratios are Powertools / cronwarden
for time and calls, cronwarden / Powertools for CPU per delivery and items/s.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from cronwarden import Engine, JobSet, RunRequest, job
from cronwarden.run.engine import OutcomeKind

from .emulators import Emulators, Unavailable
from .stats import summary

RUNS = 30
ITEMS = 300
REPEATS = 3
KINDS = ("first", "duplicate")  #: a run's first delivery, then a duplicate of it


class _Context:
    """The part of a Lambda context Powertools reads (the remaining time)."""

    function_name = "bench"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def _work(n: int = 200) -> int:
    """The handler's own work: the same for both sides."""
    return sum(i * i for i in range(n))


class _Counted:
    """A boto3 DynamoDB client whose calls are counted."""

    def __init__(self, endpoint: str, region: str) -> None:
        import boto3

        self.client = boto3.client("dynamodb", endpoint_url=endpoint, region_name=region)
        self.calls = 0
        self.client.meta.events.register("before-call.dynamodb", self._count)

    def _count(self, **_: Any) -> None:
        self.calls += 1


def measure(
    emulators: Emulators,
    stores: list[str],
    runs: int = RUNS,
    items: int = ITEMS,
    repeats: int = REPEATS,
) -> dict[str, Any]:
    if "dynamodb" not in stores:
        return {"skipped": "needs --stores dynamodb"}
    try:
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent,
            idempotent_function,
        )
    except ImportError as exc:
        raise Unavailable(f"aws-lambda-powertools is not installed ({exc})") from None
    moto = emulators.moto()
    with emulators.store("dynamodb") as store:
        counted = _Counted(moto.endpoint, moto.region)
        layer = DynamoDBPersistenceLayer(
            table_name=store.table,  # type: ignore[attr-defined]
            key_attr="pk",
            sort_key_attr="sk",
            boto3_client=counted.client,
        )
        config = IdempotencyConfig(event_key_jmespath="window", expires_after_seconds=3600)

        @idempotent(persistence_store=layer, config=config)
        def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
            return {"result": _work()}

        # A layer keeps the first configuration it is given: one per decorator.
        item_layer = DynamoDBPersistenceLayer(
            table_name=store.table,  # type: ignore[attr-defined]
            key_attr="pk",
            sort_key_attr="sk",
            boto3_client=counted.client,
        )
        per_item_config = IdempotencyConfig(expires_after_seconds=3600)  # key: the whole item
        per_item_config.register_lambda_context(_Context())

        @idempotent_function(
            data_keyword_argument="item", persistence_store=item_layer, config=per_item_config
        )
        def process(item: dict[str, Any]) -> int:
            return _work(20)

        count = {"n": items}

        def run_handler(ctx: Any) -> None:
            _work()

        def items_handler(ctx: Any, count: dict[str, int] = count) -> None:
            for _ in ctx.items(range(count["n"])):
                _work(20)

        # One hourly job per run, each run of its current window (what a scheduled fire is):
        # a past window would cost cronwarden one read more on DynamoDB (raising the success
        # window to a maximum; see docs/benchmarks.md), which Powertools does not do at all.
        jobs = JobSet(
            [
                *(
                    job(f"bench-pt-run-{i}", cron="0 * * * *", max_runtime="5m")(run_handler)
                    for i in range(runs + 1)
                ),
                *(
                    job(f"bench-pt-items-{r}", cron="0 0 * * *", max_runtime="5m")(items_handler)
                    for r in range(repeats + 1)
                ),
            ]
        )
        engine = Engine(jobs, store)
        hour = jobs["bench-pt-run-0"].schedule.floor(datetime.now(UTC))
        windows = list(range(1, runs + 1))
        context = _Context()

        def cw_run(n: int) -> tuple[float, int, float]:
            before = store.round_trips
            cpu, started = time.process_time(), time.perf_counter()
            outcome = engine.execute(RunRequest(f"bench-pt-run-{n}", hour))
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            if outcome.kind not in (OutcomeKind.SUCCEEDED, OutcomeKind.DUPLICATE):
                raise RuntimeError(f"cronwarden run: {outcome}")
            return elapsed, store.round_trips - before, cpu

        def pt_run(n: int) -> tuple[float, int, float]:
            before = counted.calls
            cpu, started = time.process_time(), time.perf_counter()
            handler({"window": f"{hour.isoformat()}/{n}", "job": "bench-pt-run"}, context)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            return elapsed, counted.calls - before, cpu

        pt_run(0)  # warm-up: clients, connections
        cw_run(0)
        samples: dict[str, list[tuple[float, int, float]]] = {
            f"{side}_{kind}_s": [] for side in ("powertools", "cronwarden") for kind in KINDS
        }
        for window in windows:  # interleaved: load drifts on a shared machine
            samples["powertools_first_s"].append(pt_run(window))
            samples["cronwarden_first_s"].append(cw_run(window))
            samples["powertools_duplicate_s"].append(pt_run(window))
            samples["cronwarden_duplicate_s"].append(cw_run(window))
        per_run: dict[str, Any] = {}
        for kind in KINDS:
            pt = samples[f"powertools_{kind}_s"]
            cw = samples[f"cronwarden_{kind}_s"]
            per_run[kind] = {
                "powertools_ms": summary([t * 1000 for t, _, _ in pt]),
                "cronwarden_ms": summary([t * 1000 for t, _, _ in cw]),
                # this process's CPU per delivery: the library and its SDK client, without the
                # emulator's server (another process), whose cost is moto's, not DynamoDB's
                "powertools_cpu_ms": summary([c * 1000 for _, _, c in pt]),
                "cronwarden_cpu_ms": summary([c * 1000 for _, _, c in cw]),
                "cpu_ratio": summary([b[2] / a[2] for a, b in zip(pt, cw, strict=True) if a[2]]),
                "powertools_calls": pt[-1][1],
                "cronwarden_calls": cw[-1][1],
                "time_ratio": summary([a[0] / b[0] for a, b in zip(pt, cw, strict=True)]),
                "calls_ratio": pt[-1][1] / max(1, cw[-1][1]),
            }

        # (b) per item
        today = jobs["bench-pt-items-0"].schedule.floor(datetime.now(UTC))
        count["n"] = min(items, 20)
        engine.execute(RunRequest(f"bench-pt-items-{repeats}", today))  # warm-up
        count["n"] = items
        pt_rates, cw_rates, pt_calls, cw_calls = [], [], 0, 0
        for rep in range(repeats):
            tag = uuid.uuid4().hex[:8]
            before = counted.calls
            started = time.perf_counter()
            for i in range(items):
                process(item={"run": tag, "i": i})
            pt_rates.append(items / (time.perf_counter() - started))
            pt_calls = counted.calls - before
            before = store.round_trips
            started = time.perf_counter()
            outcome = engine.execute(RunRequest(f"bench-pt-items-{rep}", today))
            cw_rates.append(items / (time.perf_counter() - started))
            cw_calls = store.round_trips - before
            if outcome.kind is not OutcomeKind.SUCCEEDED:
                raise RuntimeError(f"cronwarden items run: {outcome}")
        per_item = {
            "items": items,
            "powertools_items_per_s": summary(pt_rates),
            "cronwarden_items_per_s": summary(cw_rates),
            "powertools_calls_per_item": pt_calls / items,
            "cronwarden_calls_per_item": cw_calls / items,
            "rate_ratio": summary([c / p for c, p in zip(cw_rates, pt_rates, strict=True)]),
        }
    return {"dynamodb": {"runs": runs, "per_run": per_run, "per_item": per_item}}


__all__ = ["measure"]
