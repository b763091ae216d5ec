"""cronwarden: scheduled serverless jobs that run once per window, never overlap and never fail
silently, on the embedded local provider, GCP or Azure."""

from __future__ import annotations

__version__ = "0.1.0"
