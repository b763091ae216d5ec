"""Deprecated alias: the Azure renderer lives with the Azure adapter
(:mod:`cronwarden.adapters.azure.deploy`)."""

from __future__ import annotations

from cronwarden.adapters.azure.deploy import QUEUE, WEBHOOK_ENV, app_settings

__all__ = ["QUEUE", "WEBHOOK_ENV", "app_settings"]
