"""Layer 7, a face: the cronwarden dashboard (``pip install 'cronwarden[dashboard]'``;
``cronwarden dashboard``).

Not imported by ``import cronwarden``, and importing this package loads neither Starlette nor
Jinja2: :func:`create_app` and :class:`Dashboard` load them when first asked for. The
``cronwarden dashboard`` command (:mod:`.command`) is contributed to the command line through an
entry point, so neither face imports the other.

May import: :mod:`cronwarden.ops` and every layer below it. Never :mod:`cronwarden.cli` and never
:mod:`cronwarden.testing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .views import Dashboard

__all__ = ["Dashboard", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "Dashboard":
        from .views import Dashboard

        return Dashboard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
