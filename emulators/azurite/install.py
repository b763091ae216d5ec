"""Installing the pinned Azurite from npm into a cache directory, reproducibly and idempotently.

The version and the whole dependency tree are pinned by ``package.json`` and ``package-lock.json``
shipped next to this module (package data). :func:`ensure_installed` runs ``npm ci`` from that
lock file into ``<cache>/<lock digest>/``, so bumping the pin installs next to the old tree and
an unchanged pin is a no-op. Concurrent callers (pytest workers, two shells) are serialised by a
file lock, and a finished install is published by an atomic rename, so nobody ever sees a
half-installed tree.

Cache root: ``$CRONWARDEN_AZURITE_DIR`` if set, else ``$XDG_CACHE_HOME/cronwarden/azurite``
(default ``~/.cache/cronwarden/azurite``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

ENV_DIR = "CRONWARDEN_AZURITE_DIR"
_MANIFESTS = ("package.json", "package-lock.json")
_MARKER = ".cronwarden-installed"
INSTALL_TIMEOUT = 600.0  #: seconds allowed for ``npm ci``


class AzuriteInstallError(RuntimeError):
    """Azurite could not be installed (npm missing, registry unreachable, ...)."""


def cache_root() -> Path:
    """The directory that holds installed Azurite trees (not created here)."""
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "cronwarden" / "azurite"


def _manifest_bytes() -> dict[str, bytes]:
    folder = resources.files(__package__ or "cronwarden.emulators.azurite")
    return {name: folder.joinpath(name).read_bytes() for name in _MANIFESTS}


def lock_digest() -> str:
    """Short digest of the shipped manifests: the name of the install directory."""
    digest = hashlib.sha256()
    for name, content in sorted(_manifest_bytes().items()):
        digest.update(name.encode() + b"\0" + content + b"\0")
    return digest.hexdigest()[:16]


def pinned_version() -> str:
    """The Azurite version the lock file pins."""
    import json

    lock = json.loads(_manifest_bytes()["package-lock.json"])
    return str(lock["packages"]["node_modules/azurite"]["version"])


def install_dir() -> Path:
    """Where the pinned tree lives once installed."""
    return cache_root() / lock_digest()


def bin_path(name: str = "azurite-table") -> Path:
    """Path of one of Azurite's launchers (``azurite-table``, ``azurite-blob``) in the tree."""
    return install_dir() / "node_modules" / ".bin" / name


def is_installed() -> bool:
    folder = install_dir()
    return (folder / _MARKER).is_file() and bin_path().exists()


def missing_tools() -> list[str]:
    """The tools an install or a start needs that are not on ``PATH`` (``node``, ``npm``)."""
    return [tool for tool in ("node", "npm") if shutil.which(tool) is None]


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_installed(*, timeout: float = INSTALL_TIMEOUT) -> Path:
    """Install the pinned Azurite unless it is already there; return the install directory.

    Idempotent and safe to call concurrently. Raises :class:`AzuriteInstallError` with npm's
    output when ``npm`` is missing or ``npm ci`` fails.
    """
    if is_installed():
        return install_dir()
    if shutil.which("npm") is None:
        raise AzuriteInstallError(
            "npm is not on PATH; install Node.js 20+ with npm (e.g. `apt-get install nodejs npm`)"
        )
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / ".install.lock"):
        if is_installed():  # another process finished while we waited
            return install_dir()
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        try:
            for name, content in _manifest_bytes().items():
                (staging / name).write_bytes(content)
            _npm_ci(staging, timeout)
            (staging / _MARKER).write_text(pinned_version() + "\n")
            final = install_dir()
            if final.exists():  # a broken earlier attempt: replace it
                shutil.rmtree(final)
            os.replace(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return install_dir()


def _npm_ci(folder: Path, timeout: float) -> None:
    argv = [
        "npm",
        "ci",
        "--prefix",
        str(folder),
        "--no-audit",
        "--no-fund",
        "--ignore-scripts",
        "--loglevel=error",
    ]
    try:
        done = subprocess.run(
            argv,
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise AzuriteInstallError(f"`npm ci` did not finish within {timeout:.0f}s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise AzuriteInstallError(f"`npm ci` failed with exit code {done.returncode}:\n{tail}")
