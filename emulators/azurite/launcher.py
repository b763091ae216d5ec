"""Running Azurite (Table service, optionally Blob) in memory on free loopback ports.

Usage::

    with Azurite().start() as azurite:
        store = TableStore.from_connection_string(azurite.connection_string, azurite.new_table())

Each service runs as a :class:`~cronwarden.emulators._process.ManagedProcess` in its own
process group and is stopped by process-group id. Nothing is persisted (``--inMemoryPersistence``,
which Azurite refuses to combine with ``--location``; it then writes no files); the logs go to a
private temporary directory removed by :meth:`Azurite.stop`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
from types import TracebackType

from cronwarden.emulators._process import (
    LOOPBACK,
    EmulatorError,
    ManagedProcess,
    free_port,
    http_ok,
)

from .install import bin_path, ensure_installed, missing_tools

ACCOUNT_NAME = "devstoreaccount1"
#: Azurite's well-known development key, published in Azurite's README. Not a secret, and it
#: works only against the emulator.
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
START_ATTEMPTS = 3  #: a free port can be taken between probing and binding: retry with another


class Azurite:
    """An in-memory Azurite; ``start()`` installs the pinned version first if needed.

    ``port`` / ``blob_port``: fixed ports, or ``None`` for free ones. The Blob service is
    started only with ``blob=True``.
    """

    def __init__(
        self, *, port: int | None = None, blob: bool = False, blob_port: int | None = None
    ) -> None:
        self._wanted_port = port
        self._wanted_blob_port = blob_port
        self.blob = blob or blob_port is not None
        self.port = 0
        self.blob_port = 0
        self._processes: list[ManagedProcess] = []
        self._workdir: str | None = None
        self._names = itertools.count(1)
        self._names_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, *, deadline: float = 60.0) -> Azurite:
        """Start the services and wait until each answers HTTP, at most ``deadline`` s each."""
        if self._processes:
            return self
        missing = missing_tools()
        if "node" in missing:
            raise EmulatorError("node is not on PATH; install Node.js 20+ to run Azurite")
        ensure_installed()
        self._workdir = tempfile.mkdtemp(prefix="cronwarden-azurite-")
        try:
            self.port = self._start_service("table", self._wanted_port, deadline)
            if self.blob:
                self.blob_port = self._start_service("blob", self._wanted_blob_port, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_service(self, service: str, wanted: int | None, deadline: float) -> int:
        last: EmulatorError | None = None
        for attempt in range(1 if wanted else START_ATTEMPTS):
            port = wanted or free_port()
            assert self._workdir is not None
            argv = [
                str(bin_path(f"azurite-{service}")),
                "--inMemoryPersistence",
                "--disableTelemetry",
                "--silent",
                f"--{service}Host",
                LOOPBACK,
                f"--{service}Port",
                str(port),
            ]
            if service == "blob":
                argv.append("--skipApiVersionCheck")
            process = ManagedProcess(
                name=f"azurite-{service}",
                argv=argv,
                log_path=os.path.join(self._workdir, f"{service}-{attempt}.log"),
            ).start()
            self._processes.append(process)
            url = f"http://{LOOPBACK}:{port}/{ACCOUNT_NAME}" + (
                "/Tables" if service == "table" else "?comp=list"
            )
            try:
                process.wait_ready(lambda u=url: http_ok(u), deadline=deadline)  # type: ignore[misc]
                return port
            except EmulatorError as exc:
                process.stop()
                self._processes.remove(process)
                last = exc
        assert last is not None
        raise last

    def stop(self) -> None:
        """Stop every service (by process group) and remove the work directory. Idempotent."""
        for process in reversed(self._processes):
            process.stop()
        self._processes.clear()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def alive(self) -> bool:
        return bool(self._processes) and all(p.alive() for p in self._processes)

    running = alive  #: same name as the other emulators' launchers

    @property
    def pids(self) -> list[int]:
        """Process (and process-group) ids of the running services, Table first."""
        return [p.pid for p in self._processes]

    @property
    def pid(self) -> int | None:
        """The Table service's process id, or None when stopped."""
        return self._processes[0].pid if self._processes else None

    def __enter__(self) -> Azurite:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- endpoints -------------------------------------------------------------------------
    @property
    def table_endpoint(self) -> str:
        self._require_started()
        return f"http://{LOOPBACK}:{self.port}/{ACCOUNT_NAME}"

    @property
    def blob_endpoint(self) -> str | None:
        self._require_started()
        return f"http://{LOOPBACK}:{self.blob_port}/{ACCOUNT_NAME}" if self.blob_port else None

    @property
    def connection_string(self) -> str:
        """Connection string for the running services (carries the public development key)."""
        parts = [
            "DefaultEndpointsProtocol=http",
            f"AccountName={ACCOUNT_NAME}",
            f"AccountKey={ACCOUNT_KEY}",
            f"TableEndpoint={self.table_endpoint};",
        ]
        if self.blob_endpoint:
            parts.insert(3, f"BlobEndpoint={self.blob_endpoint}")
        return ";".join(parts)

    def _require_started(self) -> None:
        if not self.port:
            raise EmulatorError("Azurite is not started")

    # -- isolation -------------------------------------------------------------------------
    def new_table(self, prefix: str = "cw") -> str:
        """A table name not used before in this emulator's life (the table is not created)."""
        with self._names_lock:
            n = next(self._names)
        return f"{prefix}{os.getpid()}x{n}"

    def drop_table(self, name: str) -> None:
        """Delete table ``name`` if the emulator still runs (missing tables are ignored)."""
        if not self.alive():
            return
        from azure.data.tables import TableServiceClient

        with TableServiceClient.from_connection_string(self.connection_string) as service:
            service.delete_table(name)  # deleting a missing table succeeds

    def reset(self) -> int:
        """Delete every table (all Table data); returns how many were deleted."""
        from azure.data.tables import TableServiceClient

        service = TableServiceClient.from_connection_string(self.connection_string)
        with service:
            names = [t.name for t in service.list_tables()]
            for name in names:
                service.delete_table(name)
        return len(names)
