"""Deprecated alias: the NCRONTAB conversion lives with the Azure adapter
(:mod:`cronwarden.adapters.azure.ncrontab`)."""

from __future__ import annotations

from cronwarden.adapters.azure.ncrontab import (
    check_portable,
    compress,
    expand_field,
    to_ncrontab,
    utc_ncrontab,
    zone_offsets,
)

__all__ = [
    "check_portable",
    "compress",
    "expand_field",
    "to_ncrontab",
    "utc_ncrontab",
    "zone_offsets",
]
