"""Deprecated: the Azure adapter uses :func:`cronwarden.redaction.redact`, the one rule set."""

from __future__ import annotations

from cronwarden.redaction import redact

__all__ = ["redact"]
