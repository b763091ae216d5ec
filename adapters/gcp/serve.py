"""The pull worker for long-running hosts (Cloud Run with CPU always allocated, GKE, a VM).

It runs core :class:`~cronwarden.Worker` loops (``Worker.serve``) on the provider's
:class:`~cronwarden.adapters.gcp.PubSubQueue`: the same engine and settlement as every other
worker. Unlike a push delivery, a pulled delivery stays invisible for the whole lease (the
queue re-extends past Pub/Sub's 600 s cap), so this is the host for runs longer than a push
subscription's ack deadline allows. Pulls return at once and are polled (50 → 250 ms), which
avoids the ~29 s block of a plain pull and the lost-message risk of cancelled blocking pulls.

    python -m cronwarden.adapters.gcp.serve --jobs my_jobs [--threads 2]

reads the provider from the environment (``CRONWARDEN_PROVIDER=gcp`` and the GCP variables), and
stops on SIGTERM / SIGINT: running handlers are asked to stop cooperatively, their deliveries
are retried, and the process exits.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import timedelta
from types import FrameType

from cronwarden.engine import Engine, EngineSettings
from cronwarden.jobs import JobSet
from cronwarden.logs import get_logger
from cronwarden.ports import Provider
from cronwarden.trigger import Worker

log = get_logger("gcp.serve")


class PullWorkers:
    """``threads`` core workers sharing one engine, store and Pub/Sub queue."""

    def __init__(
        self,
        jobs: JobSet,
        provider: Provider,
        *,
        threads: int = 1,
        settings: EngineSettings | None = None,
        wait: float = 1.0,
    ) -> None:
        self.jobs = jobs
        self.provider = provider
        self.engine = Engine(jobs, provider.store(), settings)
        self.queue = provider.queue()
        self.workers = [Worker(self.engine, self.queue) for _ in range(max(1, threads))]
        for worker in self.workers:
            # A redelivery must come only after the lease has run out (else it is judged
            # "in progress" and acknowledged). Visibility is extended at most one renewal
            # interval after the lease moved, so it is the lease TTL plus that interval.
            worker.visibility *= 1 + self.engine.settings.renew_fraction
        self.stop_event = threading.Event()
        self.wait = wait
        self._threads: list[threading.Thread] = []

    def start(self) -> PullWorkers:
        for i, worker in enumerate(self.workers):
            thread = threading.Thread(
                target=worker.serve,
                args=(self.stop_event,),
                kwargs={"wait": self.wait},
                name=f"cronwarden-pull-{i}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        log.info(
            "pull workers started (%d thread(s))",
            len(self.workers),
            extra={"event": "worker.started", "threads": len(self.workers)},
        )
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop polling, interrupt running handlers cooperatively, join, close the provider."""
        self.stop_event.set()
        self.engine.shutdown()
        for thread in self._threads:
            thread.join(timeout)
        self.provider.close()

    def run_until_signalled(self) -> None:
        """Serve in the calling thread's process until SIGTERM / SIGINT."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.stop_event.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        self.start()
        while not self.stop_event.wait(0.5):
            pass
        self.stop()


def main(argv: list[str] | None = None) -> None:
    from cronwarden.config import load_jobs, provider_from_env
    from cronwarden.logs import configure

    parser = argparse.ArgumentParser(prog="python -m cronwarden.adapters.gcp.serve")
    parser.add_argument("--jobs", required=True, help="job module (dotted name or .py path)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--lease-margin", type=float, default=60.0, help="seconds added to max runtime"
    )
    args = parser.parse_args(argv)
    configure(stream=sys.stderr)
    settings = EngineSettings(lease_margin=timedelta(seconds=args.lease_margin))
    workers = PullWorkers(
        load_jobs(args.jobs), provider_from_env(), threads=args.threads, settings=settings
    )
    workers.run_until_signalled()


if __name__ == "__main__":
    main()
