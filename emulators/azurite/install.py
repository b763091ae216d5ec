"""Installing the pinned Azurite from npm into a cache directory, reproducibly and idempotently.

The version and the whole dependency tree are pinned by ``package.json`` and ``package-lock.json``
shipped next to this module (package data). :func:`ensure_installed` runs ``npm ci`` from that
lock file into ``<cache>/<lock digest>/`` through the shared pinned-npm helper
(:mod:`cronwarden.emulators._npm`: idempotent, serialised by a file lock, published by an atomic
rename, so nobody ever sees a half-installed tree).

Cache root: ``$CRONWARDEN_AZURITE_DIR`` if set, else ``$XDG_CACHE_HOME/cronwarden/azurite``
(default ``~/.cache/cronwarden/azurite``).
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from .._npm import MANIFESTS, NpmInstallError, PinnedNpmTree, locked_version
from .._npm import cache_root as _npm_cache_root
from .._npm import lock_digest as _lock_digest

ENV_DIR = "CRONWARDEN_AZURITE_DIR"
INSTALL_TIMEOUT = 600.0  #: seconds allowed for ``npm ci``


class AzuriteInstallError(NpmInstallError):
    """Azurite could not be installed (npm missing, registry unreachable, ...)."""


def cache_root() -> Path:
    """The directory that holds installed Azurite trees (not created here)."""
    return _npm_cache_root(ENV_DIR, "azurite")


def _manifest_bytes() -> dict[str, bytes]:
    folder = resources.files(__package__ or "cronwarden.emulators.azurite")
    return {name: folder.joinpath(name).read_bytes() for name in MANIFESTS}


def pinned_version() -> str:
    """The Azurite version the lock file pins."""
    return locked_version(_manifest_bytes(), "azurite")


def bin_path(name: str = "azurite-table") -> Path:
    """Path of one of Azurite's launchers (``azurite-table``, ``azurite-blob``) in the tree."""
    return install_dir() / "node_modules" / ".bin" / name


_TREE = PinnedNpmTree(
    root=cache_root,
    manifests=_manifest_bytes,
    complete=lambda folder: (folder / "node_modules" / ".bin" / "azurite-table").exists(),
    marker_text=pinned_version,
    error=AzuriteInstallError,
)


def lock_digest() -> str:
    """Short digest of the shipped manifests: the name of the install directory."""
    return _lock_digest(_manifest_bytes())


def install_dir() -> Path:
    """Where the pinned tree lives once installed."""
    return _TREE.install_dir()


def is_installed() -> bool:
    return _TREE.is_installed()


def missing_tools() -> list[str]:
    """The tools an install or a start needs that are not on ``PATH`` (``node``, ``npm``)."""
    return [tool for tool in ("node", "npm") if shutil.which(tool) is None]


def ensure_installed(*, timeout: float = INSTALL_TIMEOUT) -> Path:
    """Install the pinned Azurite unless it is already there; return the install directory.

    Idempotent and safe to call concurrently. Raises :class:`AzuriteInstallError` with npm's
    output when ``npm`` is missing or ``npm ci`` fails.
    """
    return _TREE.ensure_installed(
        timeout=timeout,
        npm_hint="npm is not on PATH; install Node.js 20+ with npm (e.g. `apt-get install nodejs "
        "npm`)",
    )
