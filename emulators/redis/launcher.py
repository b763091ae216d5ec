"""A throwaway ``redis-server`` (and a three-node Redis Cluster) for tests and development.

Each server runs in its own process group on a free loopback port, with its working directory
(and any persistence file) in a temporary directory removed at :meth:`RedisServer.stop`; it is
stopped by its process id, never by name. The system service of the Debian package is not used.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .._process import LOOPBACK, EmulatorError, ManagedProcess, free_port

INSTALL_HINT = "install Debian's redis-server (apt-get install -y redis-server)"


def missing_reason() -> str | None:
    """Why no server can be started here (``None``: ``redis-server`` and ``redis-cli`` are on
    the PATH)."""
    missing = [name for name in ("redis-server", "redis-cli") if shutil.which(name) is None]
    if missing:
        return f"{' and '.join(missing)} not found on PATH ({INSTALL_HINT})"
    return None


def ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a Redis server answers ``PING`` on ``host:port`` (raw RESP: no client)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer:
    """One ``redis-server`` on ``127.0.0.1``. ``appendonly``: keep an append-only file in the
    temporary directory (flushed at a stop by SIGTERM), so a :meth:`restart` keeps the data;
    without it a restart empties the server. ``cluster``: start as a cluster node (see
    :class:`RedisCluster`).
    """

    port: int = 0
    appendonly: bool = False
    cluster: bool = False
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cw-redis-")))
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise EmulatorError("redis-server was not started")
        return self._process.pid

    def _argv(self) -> list[str]:
        argv = [
            "redis-server",
            "--port", str(self.port),
            "--bind", LOOPBACK,
            "--protected-mode", "yes",
            "--dir", str(self.directory),
            "--save", "",
            "--daemonize", "no",
            "--logfile", "",
        ]  # fmt: skip
        if self.appendonly:
            argv += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            argv += ["--appendonly", "no"]
        if self.cluster:
            argv += [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(self.directory / "nodes.conf"),
                "--cluster-node-timeout", "5000",
            ]  # fmt: skip
        return argv

    def start(self, *, deadline: float = 30.0) -> RedisServer:
        reason = missing_reason()
        if reason is not None:
            raise EmulatorError(f"redis-server cannot start: {reason}")
        if not self.port:
            self.port = _free_port(cluster=self.cluster)
        self._process = ManagedProcess(
            "redis-server", self._argv(), str(self.directory / "redis.log")
        ).start()
        self._process.wait_ready(lambda: ping(LOOPBACK, self.port), deadline=deadline)
        return self

    def stop(self, *, keep_directory: bool = False) -> None:
        """Stop the process group by pid; remove the directory unless ``keep_directory``."""
        if self._process is not None:
            self._process.stop(grace=5.0)
            self._process = None
        if not keep_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def restart(self) -> None:
        """Stop and start again on the same port and directory (the chaos suite's "server
        restarted"); the data survives only with ``appendonly``."""
        self.stop(keep_directory=True)
        self.start()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


@dataclass
class RedisCluster:
    """Three master nodes without replicas, joined with ``redis-cli --cluster create``."""

    size: int = 3
    nodes: list[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """A startup node: the client discovers the others."""
        return self.nodes[0].url

    def start(self, *, deadline: float = 60.0) -> RedisCluster:
        try:
            for _ in range(self.size):
                self.nodes.append(RedisServer(cluster=True).start())
            addresses = [f"{LOOPBACK}:{node.port}" for node in self.nodes]
            created = subprocess.run(
                ["redis-cli", "--cluster", "create", *addresses,
                 "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True, text=True, timeout=deadline, check=False,
            )  # fmt: skip
            if created.returncode != 0:
                raise EmulatorError(f"redis-cli --cluster create failed:\n{created.stdout[-2000:]}")
            self._wait_ok(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ok(self, deadline: float) -> None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            states = [
                subprocess.run(
                    ["redis-cli", "-h", LOOPBACK, "-p", str(node.port), "cluster", "info"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                    check=False,
                ).stdout
                for node in self.nodes
            ]
            if all("cluster_state:ok" in state for state in states):
                return
            time.sleep(0.2)
        raise EmulatorError(f"Redis Cluster not ok after {deadline:.0f}s")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes = []

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _free_port(*, cluster: bool) -> int:
    """A free loopback port; for a cluster node, one whose bus port (``port + 10000``) is free
    too."""
    for _ in range(50):
        port = free_port()
        if not cluster or (port + 10000 < 65536 and _bindable(port + 10000)):
            return port
    raise EmulatorError("no free port pair for a Redis Cluster node")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True
