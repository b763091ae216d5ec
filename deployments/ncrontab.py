"""Deprecated alias: the NCRONTAB conversion lives with the Azure adapter
(:mod:`cronwarden.adapters.azure.ncrontab`)."""

from __future__ import annotations

from cronwarden.adapters.azure.ncrontab import *  # noqa: F403
