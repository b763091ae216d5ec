"""The cronwarden dashboard (``pip install 'cronwarden[dashboard]'``; ``cronwarden dashboard``).

Not imported by ``import cronwarden``: Starlette and Jinja2 load only here.
"""

from __future__ import annotations

from .app import create_app
from .views import Dashboard

__all__ = ["Dashboard", "create_app"]
