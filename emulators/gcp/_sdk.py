"""Locating the Google Cloud SDK and the official emulators it ships.

The SDK root is resolved once per process and cached: first ``$CRONWARDEN_GCLOUD_SDK_ROOT`` (or
``$CLOUDSDK_ROOT_DIR``), then the real path of the ``gcloud`` executable (``<root>/bin/gcloud``,
instant), and only as a last resort ``gcloud info`` (about a second).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

INSTALL_HINT = (
    "install the Google Cloud SDK and its emulators: "
    "`gcloud components install pubsub-emulator cloud-firestore-emulator` "
    "(or the google-cloud-cli-pubsub-emulator / google-cloud-cli-firestore-emulator packages), "
    "plus a Java runtime (JRE 11+)"
)

_RELATIVE = {
    "pubsub": os.path.join("platform", "pubsub-emulator", "bin", "cloud-pubsub-emulator"),
    "firestore": os.path.join("platform", "cloud-firestore-emulator", "cloud_firestore_emulator"),
}


def _looks_like_sdk(root: str) -> bool:
    return os.path.isdir(os.path.join(root, "platform"))


@functools.cache
def sdk_root() -> str | None:
    """The SDK root directory, or ``None`` when no SDK is installed. Cached."""
    for var in ("CRONWARDEN_GCLOUD_SDK_ROOT", "CLOUDSDK_ROOT_DIR"):
        value = os.environ.get(var)
        if value and _looks_like_sdk(value):
            return value
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return None
    candidate = os.path.dirname(os.path.dirname(os.path.realpath(gcloud)))
    if _looks_like_sdk(candidate):
        return candidate
    try:
        out = subprocess.run(
            [gcloud, "info", "--format=value(installation.sdk_root)"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if out and _looks_like_sdk(out) else None


def emulator_launcher(which: str) -> str | None:
    """Path of the official launcher script for ``which`` (``pubsub`` or ``firestore``)."""
    root = sdk_root()
    if root is None:
        return None
    path = os.path.join(root, _RELATIVE[which])
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def missing_reason(which: str) -> str | None:
    """Why the ``which`` emulator cannot run here (``None`` when it can)."""
    if emulator_launcher(which) is None:
        where = sdk_root()
        found = f"SDK at {where} has no {which} emulator" if where else "no Google Cloud SDK found"
        return f"{which} emulator not installed ({found}); {INSTALL_HINT}"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return f"{which} emulator needs Java, none found on PATH; {INSTALL_HINT}"
    return None
