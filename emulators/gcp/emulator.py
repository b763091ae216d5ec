"""Start, reset and stop the official Pub/Sub and Firestore emulators.

Each emulator runs through its own launcher script from the SDK (not ``gcloud``), on a free
127.0.0.1 port, in its own process group (see ``cronwarden.emulators._process.ManagedProcess``),
so :meth:`GcpEmulator.stop` kills the launcher and its Java child together. Readiness is polled
over HTTP: ``GET /`` answers ``Ok`` once the server accepts requests.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from types import TracebackType
from typing import ClassVar, Self

from .._process import LOOPBACK, EmulatorError, ManagedProcess, ensure_port_free, free_port
from ._sdk import emulator_launcher, missing_reason

START_ATTEMPTS = 3  #: a free port can be taken between choosing and binding it; retry


class EmulatorMissing(EmulatorError):
    """The emulator binaries (or Java) are not installed; the message says how to install them."""


def _request(url: str, method: str = "GET", timeout: float = 5.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, method=method)  # noqa: S310 - loopback only
    try:
        with urllib.request.urlopen(req, timeout=timeout) as reply:  # noqa: S310
            return int(reply.status), reply.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


class GcpEmulator:
    """One official emulator process. Use as a context manager or call start()/stop().

    ``port`` 0 picks a free port. ``log_dir`` holds the process output (a temp dir by default).
    """

    which: ClassVar[str] = ""
    env_var: ClassVar[str] = ""

    def __init__(self, *, port: int = 0, log_dir: str | None = None) -> None:
        self.host = LOOPBACK
        self.port = port
        self._fixed_port = port != 0
        self._log_dir = log_dir
        self._process: ManagedProcess | None = None

    # -- subclass hooks ---------------------------------------------------------------------
    def _argv(self, launcher: str, port: int) -> list[str]:
        raise NotImplementedError

    def reset(self) -> None:
        """Wipe all emulator state."""
        raise NotImplementedError

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, the value of :attr:`env_var` for client libraries."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.alive()

    def ready(self) -> bool:
        """True when ``GET /`` answers ``Ok``."""
        try:
            status, body = _request(self.url + "/", timeout=1.0)
        except OSError:
            return False
        return status == 200 and body.strip() == b"Ok"

    def start(self, *, deadline: float = 60.0) -> Self:
        """Launch and wait until ready; raises :class:`EmulatorMissing` or ``EmulatorError``."""
        reason = missing_reason(self.which)
        launcher = emulator_launcher(self.which)
        if reason is not None or launcher is None:
            raise EmulatorMissing(reason or f"{self.which} emulator not found")
        log_dir = self._log_dir or tempfile.mkdtemp(prefix=f"cw-{self.which}-emulator-")
        os.makedirs(log_dir, exist_ok=True)
        last: EmulatorError | None = None
        if self._fixed_port:
            ensure_port_free(f"{self.which} emulator", self.port)
        for _ in range(1 if self._fixed_port else START_ATTEMPTS):
            port = self.port if self._fixed_port else free_port(LOOPBACK)
            process = ManagedProcess(
                name=f"{self.which} emulator",
                argv=self._argv(launcher, port),
                log_path=os.path.join(log_dir, f"{self.which}-{port}.log"),
            )
            self.port = port
            process.start()
            try:
                process.wait_ready(self.ready, deadline=deadline)
            except EmulatorError as exc:
                process.stop()
                last = exc
                continue
            self._process = process
            atexit.register(self.stop)  # a forgotten stop() must not leave Java running
            return self
        raise last or EmulatorError(f"{self.which} emulator did not start")

    def stop(self) -> None:
        """Stop the emulator's whole process group. Idempotent."""
        if self._process is not None:
            self._process.stop()
            self._process = None
            atexit.unregister(self.stop)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class PubSubEmulator(GcpEmulator):
    """The official Pub/Sub emulator (``cloud-pubsub-emulator``). Clients read
    ``PUBSUB_EMULATOR_HOST``; cronwarden's adapters also take the address explicitly."""

    which = "pubsub"
    env_var = "PUBSUB_EMULATOR_HOST"

    def _argv(self, launcher: str, port: int) -> list[str]:
        return [launcher, f"--host={LOOPBACK}", f"--port={port}"]

    def reset(self) -> None:
        """``POST /reset``: deletes every topic, subscription and message (a few ms)."""
        status, body = _request(self.url + "/reset", method="POST")
        if status != 200:
            raise EmulatorError(f"pubsub reset failed: HTTP {status} {body[:200]!r}")


class FirestoreEmulator(GcpEmulator):
    """The official Firestore emulator (native mode). Clients read ``FIRESTORE_EMULATOR_HOST``."""

    which = "firestore"
    env_var = "FIRESTORE_EMULATOR_HOST"

    def _argv(self, launcher: str, port: int) -> list[str]:
        return [launcher, "start", f"--host={LOOPBACK}", f"--port={port}"]

    def reset(self, project: str = "cronwarden-test") -> None:
        """Delete every document of ``project``'s default database (50-150 ms).

        Tests can instead use a fresh project id each, which needs no call at all.
        """
        path = "/emulator/v1/projects/{}/databases/(default)/documents".format(
            urllib.parse.quote(project, safe="")
        )
        end = time.monotonic() + 30.0
        while True:
            status, body = _request(self.url + path, method="DELETE", timeout=30.0)
            if status == 200:
                return
            # A transaction left open by a killed client holds locks for a while; poll.
            if time.monotonic() >= end:
                raise EmulatorError(f"firestore reset failed: HTTP {status} {body[:200]!r}")
            time.sleep(0.2)
