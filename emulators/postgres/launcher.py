"""Start and stop a private PostgreSQL server (the distribution's server binaries, no Docker).

    with PostgresServer() as server:
        print(server.dsn)        # postgresql://postgres@127.0.0.1:PORT/postgres

The data directory, the Unix socket and the server log live in one temporary directory (owned
by ``postgres`` when we run as root) that :meth:`PostgresServer.stop` removes. :meth:`freeze` /
:meth:`thaw` stop and resume the whole server (the postmaster and every backend, each of which
is a session leader of its own) for outage tests.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from types import TracebackType

from .._process import LOOPBACK, EmulatorError, free_port

BIN_ENV = "CRONWARDEN_POSTGRES_BIN"  #: directory holding initdb / pg_ctl (overrides the search)
INSTALL_HINT = (
    "install the PostgreSQL server binaries (Debian/Ubuntu: `apt-get install postgresql-15`; "
    f"or point ${BIN_ENV} at the directory holding initdb and pg_ctl)"
)
#: Settings for a disposable test server: no durability work, enough connections for
#: several hosts' pools.
TEST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "32MB",
}


def find_bindir() -> str | None:
    """The directory of ``initdb`` and ``pg_ctl``: ``$CRONWARDEN_POSTGRES_BIN``, Debian's
    ``/usr/lib/postgresql/<newest>/bin``, or ``PATH``."""
    candidates = [os.environ.get(BIN_ENV, "")]
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    versions.sort(key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    candidates += reversed(versions)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(os.path.dirname(initdb))
    for directory in candidates:
        if directory and all(
            os.access(os.path.join(directory, tool), os.X_OK) for tool in ("initdb", "pg_ctl")
        ):
            return directory
    return None


def missing_reason() -> str | None:
    """Why no server can be started here (with how to fix it), or ``None``."""
    if find_bindir() is None:
        return f"no PostgreSQL server binaries (initdb, pg_ctl) found: {INSTALL_HINT}"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root needs `runuser` (util-linux) to start PostgreSQL as `postgres`"
    return None


class PostgresServer:
    """One private server. ``settings``: extra ``-c`` server settings (default: the fast,
    non-durable :data:`TEST_SETTINGS`)."""

    def __init__(
        self,
        *,
        bindir: str | None = None,
        settings: dict[str, str] | None = None,
        user: str = "postgres",
    ) -> None:
        self.bindir = bindir or find_bindir() or ""
        self.settings = dict(TEST_SETTINGS if settings is None else settings)
        self.user = user
        self.host = LOOPBACK
        self.port = 0
        self.directory = ""
        self.pid = 0

    @property
    def data_dir(self) -> str:
        return os.path.join(self.directory, "data")

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "server.log")

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/postgres"

    def _as_server_user(self, argv: list[str]) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", self.user, "--", *argv]
        return argv

    def _run(self, argv: list[str], what: str, timeout: float = 120) -> None:
        done = subprocess.run(
            self._as_server_user(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise EmulatorError(
                f"{what} failed (exit {done.returncode}):\n{done.stdout[-2000:]}"
                f"{done.stderr[-2000:]}\n{self.log_tail()}"
            )

    def start(self, *, attempts: int = 3) -> PostgresServer:
        reason = missing_reason()
        if reason is not None and not self.bindir:
            raise EmulatorError(reason)
        # Not under pytest's 0700 tmp dirs: the server user must reach its directory.
        self.directory = tempfile.mkdtemp(prefix="cw-pg-")
        os.makedirs(self.data_dir, mode=0o700)
        if os.geteuid() == 0:
            import pwd

            entry = pwd.getpwnam(self.user)
            for path in (self.directory, self.data_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        try:
            self._run(
                [
                    os.path.join(self.bindir, "initdb"),
                    "-D",
                    self.data_dir,
                    "-A",
                    "trust",
                    "-U",
                    self.user,
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "--no-sync",
                ],
                "initdb",
            )
            for attempt in range(1, attempts + 1):
                self.port = free_port()
                try:
                    self._pg_ctl_start()
                    break
                except EmulatorError:
                    if attempt == attempts:
                        raise
            self.pid = self._read_pid()
        except BaseException:
            self._remove_directory()
            raise
        return self

    def _pg_ctl_start(self) -> None:
        options = [
            f"-c listen_addresses={self.host}",
            f"-p {self.port}",
            f"-k {self.directory}",
            *(f"-c {k}={v}" for k, v in self.settings.items()),
        ]
        self._run(
            [
                os.path.join(self.bindir, "pg_ctl"),
                "-D",
                self.data_dir,
                "-l",
                self.log_path,
                "-o",
                " ".join(options),
                "-w",
                "-t",
                "60",
                "start",
            ],
            "pg_ctl start",
        )

    def _read_pid(self) -> int:
        with open(os.path.join(self.data_dir, "postmaster.pid")) as handle:
            return int(handle.readline().strip())

    def alive(self) -> bool:
        if not self.pid:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def processes(self) -> list[int]:
        """The postmaster and its children (each backend is a session leader of its own, so a
        process-group signal would miss them)."""
        children = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat") as handle:
                    # the command may hold spaces and parentheses: the ppid follows the last ")"
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
                if ppid == self.pid:
                    children.append(int(entry))
        return [self.pid, *children]

    def freeze(self) -> None:
        """SIGSTOP the postmaster, then every server process: connections hang (the kernel
        still accepts them), nothing is refused: the worst kind of outage."""
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in reversed(self.processes()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def stop(self, *, grace: float = 30.0) -> None:
        """Fast shutdown by pid (SIGINT), SIGKILL of its process group after ``grace`` seconds,
        then remove the directory. Idempotent."""
        if self.pid and self.alive():
            self.thaw()  # a frozen server cannot shut down
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
            end = time.monotonic() + grace
            while self.alive() and time.monotonic() < end:
                time.sleep(0.05)
            if self.alive():
                for pid in self.processes():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                end = time.monotonic() + 10
                while self.alive() and time.monotonic() < end:
                    time.sleep(0.05)
        self.pid = 0
        self._remove_directory()

    def _remove_directory(self) -> None:
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = ""

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as handle:
                return "".join(handle.readlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
