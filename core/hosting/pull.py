"""Pull workers for long-running hosts, on any provider (Cloud Run with CPU always allocated,
GKE, a VM, a container next to Service Bus).

It runs core :class:`~cronwarden.Worker` loops (``Worker.serve``) on the provider's queue: the
same engine and settlement as every other worker. A pulled delivery stays invisible for the
whole lease (the queue re-extends it while the lease is renewed), so this is the host for runs
longer than a push subscription's ack deadline allows.

    python -m cronwarden.hosting.pull --jobs my_jobs [--threads 2]

(also ``python -m cronwarden.adapters.gcp.serve``) reads the provider from the environment
(``CRONWARDEN_PROVIDER`` and that provider's variables), and stops on SIGTERM / SIGINT: running
handlers are asked to stop cooperatively, their deliveries are retried, and the process exits.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import timedelta
from types import FrameType

from ..jobs.definitions import JobSet
from ..model.logs import get_logger
from ..model.ports import Provider
from ..run.engine import EngineSettings
from .root import Composition

log = get_logger("hosting.pull")


class PullWorkers:
    """``threads`` core workers sharing one engine, store and queue (one composition)."""

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
        self.root = Composition(jobs, provider=provider, settings=settings)
        self.engine = self.root.engine
        self.queue = self.root.queue
        # Visibility as every pull worker has it (lease TTL + one renewal interval): the factor
        # is applied once, in cronwarden.hosting.trigger.lease_visibility.
        self.workers = [self.root.pull_worker() for _ in range(max(1, threads))]
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
        """Stop polling, interrupt running handlers cooperatively, join, send the pending job
        pings, close the provider."""
        self.stop_event.set()
        self.engine.shutdown()
        for thread in self._threads:
            thread.join(timeout)
        self.root.close()  # pending job pings, then the provider

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


def main(argv: list[str] | None = None, *, prog: str = "python -m cronwarden.hosting.pull") -> None:
    from ..jobs.config import load_jobs, provider_from_env
    from ..model.logs import configure
    from .settings import HostSettings

    host = HostSettings.from_env()
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument(
        "--jobs",
        required=not host.jobs,
        default=host.jobs or None,
        help="job module (dotted name or .py path; or $CRONWARDEN_JOBS)",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--lease-margin", type=float, default=60.0, help="seconds added to max runtime"
    )
    args = parser.parse_args(argv)
    configure(stream=sys.stderr)
    settings = EngineSettings(lease_margin=timedelta(seconds=args.lease_margin))
    workers = PullWorkers(
        load_jobs(args.jobs),
        provider_from_env(host.provider),
        threads=args.threads,
        settings=settings,
    )
    workers.run_until_signalled()


if __name__ == "__main__":
    main()
