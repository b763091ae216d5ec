"""A worker process for tests: executes one run request against a local store and prints the
outcome as JSON on the last line of stdout.

    python -m tests.support.worker --db PATH --job NAME --window 2026-01-20T02:00Z
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta

from cronwarden import Engine, EngineSettings, JobSet, RunRequest
from cronwarden.adapters.local import SQLiteStore
from cronwarden.model import parse_window
from cronwarden.model.logs import configure

from . import jobs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--window", required=True)
    parser.add_argument("--lease-margin", type=float, default=60.0)
    parser.add_argument("--go-file", help="wait until this file exists before executing")
    args = parser.parse_args()
    configure(stream=sys.stderr)
    store = SQLiteStore(args.db)
    settings = EngineSettings(lease_margin=timedelta(seconds=args.lease_margin))
    engine = Engine(JobSet.from_module(jobs), store, settings)
    if args.go_file:
        import os
        import time

        while not os.path.exists(args.go_file):
            time.sleep(0.005)
    outcome = engine.execute(RunRequest(args.job, parse_window(args.window)))
    print(
        json.dumps(
            {
                "kind": outcome.kind.value,
                "reason": outcome.reason,
                "detail": outcome.detail,
                "run_id": outcome.run_id,
                "round_trips": store.round_trips,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
