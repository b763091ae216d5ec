"""Layer 2, ``jobs``: what a user declares.

Job definitions and the job set (:mod:`.definitions`), their policies: overlap, retry, catch-up
and liveness (:mod:`.policies`), expectations (:mod:`.expect`), event consumers
(:mod:`.consumers`), pause and snooze (:mod:`.pause`), command jobs (:mod:`.command`), crontab
import (:mod:`.crontab`, :mod:`.crontab_codegen`), and loading a jobs module and choosing a
provider by configuration (:mod:`.loading`, :mod:`.config`).

May import: :mod:`cronwarden.model` and its own modules.

``cronwarden.jobs`` was one module before the core was cut into layers; its names
(:func:`job`, :class:`Job`, :class:`JobSet`, :class:`Retry`, …) keep working here and come from
:mod:`.definitions`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .definitions import CatchUp as CatchUp
    from .definitions import Handler as Handler
    from .definitions import Job as Job
    from .definitions import JobSet as JobSet
    from .definitions import Liveness as Liveness
    from .definitions import Overlap as Overlap
    from .definitions import Retry as Retry
    from .definitions import check_dependencies as check_dependencies
    from .definitions import job as job


def __getattr__(name: str) -> Any:
    # importlib, not ``from . import``: that form asks this very function for the submodule
    module = importlib.import_module(".definitions", __name__)
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
