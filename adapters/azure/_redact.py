"""Deprecated: the Azure adapter uses :func:`cronwarden.model.redaction.redact`, the one rule
set."""

from __future__ import annotations

from cronwarden.model.redaction import redact

__all__ = ["redact"]
