"""Deprecated names that moved to another module, resolved on first access."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``: each name in ``moved`` is read from the module
    it moved to (imported then, not when ``module`` is); any other name is missing."""

    def __getattr__(name: str) -> Any:
        if name in moved:
            return getattr(importlib.import_module(moved[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
