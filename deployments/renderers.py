"""The per-cloud renderers, found by provider name.

The render driver (:mod:`cronwarden.deploy.render`) knows no cloud: it asks this registry for
the :class:`CloudRenderer` of ``--provider`` (and of ``--watcher-provider``) and writes what it
returns. Each cloud's renderer lives next to its adapter (``cronwarden.adapters.gcp.deploy``,
``cronwarden.adapters.azure.deploy``) and is imported only when asked for.

Adding a cloud (e.g. AWS) needs no edit here nor in the driver: ship a module with an object
satisfying :class:`CloudRenderer` and either call :func:`register` (``register("aws",
"cronwarden.adapters.aws.deploy:RENDERER")``) or declare the entry point
``[project.entry-points."cronwarden.deploy.renderers"] aws = "pkg.module:RENDERER"``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol

from cronwarden.errors import ConfigurationError

from .hcl import Item
from .spec import Plan

ENTRY_POINT_GROUP = "cronwarden.deploy.renderers"
_BUILTIN = {
    "gcp": "cronwarden.adapters.gcp.deploy:RENDERER",
    "azure": "cronwarden.adapters.azure.deploy:RENDERER",
}
_registered: dict[str, CloudRenderer | str] = {}


@dataclass(frozen=True)
class RootOptions:
    """What one Terraform root module is for.

    ``watcher_only``: the root runs only the liveness watcher of jobs running on ``watched``
    (another cloud's renderer). Otherwise it runs the jobs, and the watcher too when
    ``watcher_here``; ``worker`` is the renderer-specific worker style (e.g. GCP's push/pull).
    """

    prefix: str
    plan: Plan
    watcher_here: bool
    watcher_only: bool = False
    watched: CloudRenderer | None = None
    worker: str = "push"

    @property
    def external_watcher(self) -> bool:
        """The jobs run here and their watcher runs in another cloud."""
        return not self.watcher_here and not self.watcher_only


class CloudRenderer(Protocol):
    """One cloud's share of ``cronwarden deploy render``."""

    name: str  #: the provider name (``--provider``)
    terraform_modules: tuple[str, ...]  #: folders under deployments/terraform the root uses

    def root(self, options: RootOptions) -> Mapping[str, Sequence[Item]]:
        """The root module's ``.tf`` files (file name => items)."""
        ...

    def watcher_environment(self, prefix: str, host: str) -> dict[str, Any]:
        """The environment a watcher running in cloud ``host`` needs to watch the jobs
        running on this cloud (values may reference :meth:`watcher_variables`)."""
        ...

    def watcher_variables(self, host: str) -> list[Item]:
        """The variables :meth:`watcher_environment` references, declared in ``host``'s
        watcher-only root module."""
        ...


def register(name: str, renderer: CloudRenderer | str) -> None:
    """Make ``renderer`` (or ``"module:attribute"`` naming it, imported on first use) the
    renderer of provider ``name``."""
    _registered[name] = renderer


def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def names() -> tuple[str, ...]:
    """Every provider with a renderer: the built-in ones first."""
    return tuple(dict.fromkeys([*_BUILTIN, *_entry_points(), *_registered]))


def choices() -> str:
    """``gcp or azure``: the provider names for an error message."""
    return " or ".join(names())


def get(name: str, what: str = "provider") -> CloudRenderer:
    """The renderer of provider ``name``; :class:`ConfigurationError` if there is none."""
    found = _registered.get(name) or _entry_points().get(name) or _BUILTIN.get(name)
    if found is None:
        raise ConfigurationError(f"unknown {what} {name!r}; choose {choices()}")
    if isinstance(found, str):
        module, _, attribute = found.partition(":")
        renderer: CloudRenderer = getattr(importlib.import_module(module), attribute)
        return renderer
    return found


__all__ = [
    "ENTRY_POINT_GROUP",
    "CloudRenderer",
    "RootOptions",
    "choices",
    "get",
    "names",
    "register",
]
