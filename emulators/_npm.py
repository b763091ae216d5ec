"""Pinned npm installs into a cache directory, reproducibly and idempotently.

One :class:`PinnedNpmTree` is a ``package.json`` + ``package-lock.json`` pair (the pin) and a
cache root. :meth:`PinnedNpmTree.ensure_installed` runs ``npm ci`` from the lock file into
``<cache root>/<lock digest>/``, so bumping the pin installs next to the old tree and an
unchanged pin is a no-op. Concurrent callers (pytest workers, two shells) are serialised by a
file lock, and a finished install is published by an atomic rename, so nobody ever sees a
half-installed tree.

Used by Azurite (:mod:`cronwarden.emulators.azurite.install`) and the offline provider schemas
(:mod:`cronwarden.deploy.schema`); each maps :class:`NpmInstallError` to its own error type.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFESTS = ("package.json", "package-lock.json")
MARKER = ".cronwarden-installed"  #: written last into a finished tree (its content: the pins)


class NpmInstallError(RuntimeError):
    """``npm ci`` could not run or failed (npm missing, registry unreachable, timeout, ...)."""


def cache_root(env_var: str, name: str) -> Path:
    """``$<env_var>`` if set, else ``$XDG_CACHE_HOME/cronwarden/<name>`` (default
    ``~/.cache/cronwarden/<name>``); not created here."""
    explicit = os.environ.get(env_var)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "cronwarden" / name


def lock_digest(manifests: Mapping[str, bytes]) -> str:
    """Short digest of the manifests (name and content): the name of the install directory."""
    digest = hashlib.sha256()
    for name, content in sorted(manifests.items()):
        digest.update(name.encode() + b"\0" + content + b"\0")
    return digest.hexdigest()[:16]


def locked_version(manifests: Mapping[str, bytes], package: str) -> str:
    """The version of ``package`` that the lock file pins."""
    lock: dict[str, Any] = json.loads(manifests["package-lock.json"])
    return str(lock["packages"][f"node_modules/{package}"]["version"])


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing) for the ``with`` block."""
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def npm_ci(folder: Path, timeout: float) -> None:
    """``npm ci`` in ``folder`` (no audit, no install scripts); raises :class:`NpmInstallError`
    with the last 30 lines of npm's output when it fails or runs past ``timeout`` seconds."""
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
        raise NpmInstallError(f"`npm ci` did not finish within {timeout:.0f}s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise NpmInstallError(f"`npm ci` failed with exit code {done.returncode}:\n{tail}")


@dataclass(frozen=True)
class PinnedNpmTree:
    """A pinned npm dependency tree installed under ``root`` (see the module docstring).

    ``manifests`` returns the two manifest files' bytes; ``complete`` says whether an install
    directory holds everything the caller needs (checked besides the marker); ``marker_text``
    is what the marker records (e.g. the pinned versions).
    """

    root: Callable[[], Path]
    manifests: Callable[[], Mapping[str, bytes]]
    complete: Callable[[Path], bool]
    marker_text: Callable[[], str]
    error: Callable[[str], Exception] = NpmInstallError  #: what a failed install raises

    def install_dir(self) -> Path:
        return self.root() / lock_digest(self.manifests())

    def is_installed(self) -> bool:
        folder = self.install_dir()
        return (folder / MARKER).is_file() and self.complete(folder)

    def ensure_installed(self, *, timeout: float, npm_hint: str) -> Path:
        """Install the pinned tree unless it is already there; return the install directory.

        Idempotent and safe to call concurrently. Raises ``error`` with npm's output when
        ``npm ci`` fails, or with ``npm_hint`` when ``npm`` is not on ``PATH``.
        """
        if self.is_installed():
            return self.install_dir()
        if shutil.which("npm") is None:
            raise self.error(npm_hint)
        root = self.root()
        root.mkdir(parents=True, exist_ok=True)
        with file_lock(root / ".install.lock"):
            if self.is_installed():  # another process finished while we waited
                return self.install_dir()
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
            try:
                for name, content in self.manifests().items():
                    (staging / name).write_bytes(content)
                try:
                    npm_ci(staging, timeout)
                except NpmInstallError as exc:
                    raise self.error(str(exc)) from exc
                (staging / MARKER).write_text(self.marker_text() + "\n")
                final = self.install_dir()
                if final.exists():  # a broken earlier attempt: replace it
                    shutil.rmtree(final)
                os.replace(staging, final)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return self.install_dir()


__all__ = [
    "MANIFESTS",
    "MARKER",
    "NpmInstallError",
    "PinnedNpmTree",
    "cache_root",
    "file_lock",
    "lock_digest",
    "locked_version",
    "npm_ci",
]
