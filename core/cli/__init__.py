"""Layer 7, a face: the ``cronwarden`` command line.

One module per command group (:mod:`.root` is the root group and ``main``; :mod:`.common` holds
the exit statuses and the options every command shares). Commands contributed by other packages
(the dashboard, deployments, emulators) are found through entry points (:mod:`.plugins`).

May import: :mod:`cronwarden.ops` and every layer below it. Never :mod:`cronwarden.dashboard`
(the other face) and never :mod:`cronwarden.testing`.

``cronwarden.cli`` was one module before the core was cut into layers; its names (``main``,
``cli``, …) keep working here and come from :mod:`.root`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .root import cli as cli
    from .root import main as main


def __getattr__(name: str) -> Any:
    # importlib, not ``from . import``: that form asks this very function for the submodule
    module = importlib.import_module(".root", __name__)
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
