"""What the numbers were measured on: CPU, cores, RAM, load, Python, SDK and emulator versions."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

PACKAGES = (
    "cronwarden",
    "cronsim",
    "google-cloud-firestore",
    "google-cloud-pubsub",
    "grpcio",
    "functions-framework",
    "azure-data-tables",
    "azure-servicebus",
    "azure-functions",
    "python-qpid-proton",
)


def _first(path: str, prefix: str) -> str:
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def _run(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return "?"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else "?"


def _gcloud_component(root: str, component: str) -> str:
    path = os.path.join(root, ".install", f"{component}.snapshot.json")
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return "?"
    for item in data.get("components", []):
        if item.get("id") == component:
            return str(item.get("version", {}).get("version_string", "?"))
    return "?"


def _git_commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return _run(["git", "-C", here, "rev-parse", "--short", "HEAD"])


def describe() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    emulators: dict[str, str] = {}
    try:
        from cronwarden.emulators.gcp import sdk_root

        root = sdk_root()
    except Exception:
        root = None
    if root:
        try:
            with open(os.path.join(root, "VERSION")) as handle:
                emulators["google-cloud-sdk"] = handle.read().strip()
        except OSError:
            emulators["google-cloud-sdk"] = "?"
        emulators["pubsub-emulator"] = _gcloud_component(root, "pubsub-emulator")
        emulators["cloud-firestore-emulator"] = _gcloud_component(root, "cloud-firestore-emulator")
    emulators["java"] = _run(["java", "-version"])
    try:
        from cronwarden.emulators.azurite import pinned_version

        emulators["azurite"] = pinned_version()
    except Exception:
        emulators["azurite"] = "?"
    emulators["node"] = _run(["node", "--version"])
    emulators["servicebus-emulator"] = f"cronwarden's own (this checkout, {_git_commit()})"
    mem_kib = _first("/proc/meminfo", "MemTotal").split()[0]
    return {
        "cpu": _first("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "ram_gib": round(int(mem_kib) / 2**20, 1) if mem_kib.isdigit() else "?",
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "load_avg_start": list(os.getloadavg()),
        "packages": versions,
        "emulators": emulators,
        "commit": _git_commit(),
    }
