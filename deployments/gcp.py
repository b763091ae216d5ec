"""Deprecated alias: the GCP renderer lives with the GCP adapter
(:mod:`cronwarden.adapters.gcp.deploy`)."""

from __future__ import annotations

from typing import Any

from cronwarden.adapters.gcp.deploy import WEBHOOK_ENV, environment, names, trigger_environment


def watcher_environment(prefix: str) -> dict[str, Any]:
    """Environment of a watcher on GCP that watches jobs running on Azure."""
    from cronwarden.adapters.azure.deploy import external_watcher_environment

    return external_watcher_environment(prefix)


__all__ = ["WEBHOOK_ENV", "environment", "names", "trigger_environment", "watcher_environment"]
