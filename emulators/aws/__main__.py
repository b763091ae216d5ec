"""``python -m cronwarden.emulators.aws --jobs MODULE [--lease-margin S] [--batch-size N]
[--visibility S]``: a
local Lambda worker process. The AWS provider comes from the environment (``CRONWARDEN_*``);
an :class:`~.event_source.EventSourceHost` feeds the run queue to the ``worker`` handler of
:func:`~cronwarden.adapters.aws.functions.make_handlers` until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import signal
import threading
from datetime import timedelta
from types import FrameType

from cronwarden.adapters.aws.functions import make_handlers, runtime_of
from cronwarden.hosting import jobset_of
from cronwarden.run.engine import EngineSettings

from .event_source import EventSourceHost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cronwarden.emulators.aws")
    parser.add_argument("--jobs", required=True, help="job module (dotted name or file)")
    parser.add_argument("--lease-margin", type=float, help="engine lease margin in seconds")
    parser.add_argument("--batch-size", type=int, default=1, help="records per invocation")
    parser.add_argument(
        "--visibility", type=int, help="receive visibility timeout (default: the queue's)"
    )
    args = parser.parse_args(argv)
    settings = None
    if args.lease_margin is not None:
        settings = EngineSettings(lease_margin=timedelta(seconds=args.lease_margin))
    _, worker, _ = make_handlers(jobset_of(args.jobs), settings=settings, configure_logging=True)
    runtime = runtime_of(worker)
    queue = runtime.sqs()
    host = EventSourceHost(queue.client, queue.queue_url, worker, batch_size=args.batch_size)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        host.serve(stop)
    finally:
        runtime.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
