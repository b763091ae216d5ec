"""``python -m cronwarden.emulators.postgres``: start a private PostgreSQL server, print its DSN,
and stop it (removing its data) on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading

from .launcher import PostgresServer


def main() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with PostgresServer() as server:
        print(f"CRONWARDEN_POSTGRES_DSN={server.dsn}", flush=True)
        print(f"postmaster pid {server.pid}; Ctrl-C stops it", file=sys.stderr, flush=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
