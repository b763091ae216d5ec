"""Layer 1, ``model``: the values every layer shares.

Schedules and windows (:mod:`.schedule`), durations (:mod:`.durations`), run requests and run
keys (:mod:`.runs`), the store and queue ports (:mod:`.ports`) and the records kept through them
(:mod:`.records`), errors (:mod:`.errors`), redaction (:mod:`.redaction`), logging
(:mod:`.logs`), settings read from the environment (:mod:`.environment`), and what one delivery
came to: the engine's outcome and the settlement verdict (:mod:`.settlement`).

May import: the standard library, cronsim, and its own modules. Nothing of cronwarden above it.

``cronwarden.model`` was one module before the core was cut into layers; its names
(:class:`RunRequest`, :class:`RunState`, :func:`run_key`, …) keep working here and come from
:mod:`.runs`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runs import MAX_REQUEST_BYTES as MAX_REQUEST_BYTES
    from .runs import REQUEST_VERSION as REQUEST_VERSION
    from .runs import WINDOW_FORMAT as WINDOW_FORMAT
    from .runs import RunRequest as RunRequest
    from .runs import RunState as RunState
    from .runs import fingerprint as fingerprint
    from .runs import format_window as format_window
    from .runs import new_run_id as new_run_id
    from .runs import parse_window as parse_window
    from .runs import run_key as run_key


def __getattr__(name: str) -> Any:
    # importlib, not ``from . import``: that form asks this very function for the submodule
    module = importlib.import_module(".runs", __name__)
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
