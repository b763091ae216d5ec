"""Module paths from before the core was cut into layers, as aliases of their new homes.

``cronwarden.engine``, ``cronwarden.ports``, ``cronwarden.liveness`` … were modules side by side
in one folder; they live in the layer packages now (``cronwarden.run.engine``,
``cronwarden.model.ports``, ``cronwarden.watch.watcher`` …). Code that imports an old path keeps
working: :class:`_AliasFinder` (on :data:`sys.meta_path` from ``import cronwarden`` on) answers an
old name with the new module itself, the very same object, so every name, ``isinstance`` check
and ``mock.patch`` target behaves as before. Each first import of an old path warns with a
:class:`DeprecationWarning` that names the new one.

``cronwarden.model``, ``cronwarden.jobs`` and ``cronwarden.cli`` were modules too and are the
layer packages now: those packages offer the old modules' names themselves (see their
``__init__``), so they need no alias here.

This table is the one place that knows the old paths; nothing of cronwarden imports through it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: old module path -> the module that holds its code now
MOVED: dict[str, str] = {
    "cronwarden.schedule": "cronwarden.model.schedule",
    "cronwarden.durations": "cronwarden.model.durations",
    "cronwarden.records": "cronwarden.model.records",
    "cronwarden.ports": "cronwarden.model.ports",
    "cronwarden.errors": "cronwarden.model.errors",
    "cronwarden.redaction": "cronwarden.model.redaction",
    "cronwarden.logs": "cronwarden.model.logs",
    "cronwarden.settlement": "cronwarden.model.settlement",
    "cronwarden.consumers": "cronwarden.jobs.consumers",
    "cronwarden.expect": "cronwarden.jobs.expect",
    "cronwarden.pause": "cronwarden.jobs.pause",
    "cronwarden.command": "cronwarden.jobs.command",
    "cronwarden.crontab": "cronwarden.jobs.crontab",
    "cronwarden.crontab_codegen": "cronwarden.jobs.crontab_codegen",
    "cronwarden.config": "cronwarden.jobs.config",
    "cronwarden.accounting": "cronwarden.run.accounting",
    "cronwarden.backfill": "cronwarden.run.backfill",
    "cronwarden.baseline": "cronwarden.run.baseline",
    "cronwarden.claiming": "cronwarden.run.claiming",
    "cronwarden.context": "cronwarden.run.context",
    "cronwarden.dependencies": "cronwarden.run.dependencies",
    "cronwarden.engine": "cronwarden.run.engine",
    "cronwarden.lease": "cronwarden.run.lease",
    "cronwarden.ledger": "cronwarden.run.ledger",
    "cronwarden.quarantine": "cronwarden.run.quarantine",
    "cronwarden.liveness": "cronwarden.watch.watcher",
    "cronwarden.events": "cronwarden.watch.consumer_health",
    "cronwarden.ops_conditions": "cronwarden.watch.conditions",
    "cronwarden.notify": "cronwarden.watch.notify",
    "cronwarden.probe": "cronwarden.watch.probe",
    "cronwarden.metrics": "cronwarden.watch.metrics",
    "cronwarden.metrics_prometheus": "cronwarden.watch.metrics_prometheus",
    "cronwarden.alerting": "cronwarden.watch.alerting",
    "cronwarden.alerting.channels": "cronwarden.watch.alerting.channels",
    "cronwarden.alerting.http": "cronwarden.watch.alerting.http",
    "cronwarden.alerting.routing": "cronwarden.watch.alerting.routing",
    "cronwarden.alerting.secrets": "cronwarden.watch.alerting.secrets",
    "cronwarden.alerting.settings": "cronwarden.watch.alerting.settings",
    "cronwarden.alerting.text": "cronwarden.watch.alerting.text",
    "cronwarden.alerting.watchdog": "cronwarden.watch.alerting.watchdog",
    "cronwarden.trigger": "cronwarden.hosting.trigger",
    "cronwarden.runtime": "cronwarden.hosting.runtime",
    "cronwarden.doctor": "cronwarden.ops.doctor",
    "cronwarden.drill": "cronwarden.ops.drill",
    "cronwarden.cli_trigger": "cronwarden.ops.manual",
    "cronwarden.cli_common": "cronwarden.cli.common",
    "cronwarden.cli_crontab": "cronwarden.cli.crontab",
    "cronwarden.cli_dashboard": "cronwarden.dashboard.command",
    "cronwarden.cli_doctor": "cronwarden.cli.doctor",
    "cronwarden.cli_ledger": "cronwarden.cli.ledger",
    "cronwarden.cli_notify": "cronwarden.cli.notify",
    "cronwarden.cli_pause": "cronwarden.cli.pause",
    "cronwarden.cli_views": "cronwarden.cli.views",
    "cronwarden.cli_windows": "cronwarden.cli.windows",
}


# Plain classes, not importlib.abc's: that module imports importlib.resources, tempfile and more
# (~45 ms), too much for every `import cronwarden` on a cold start.


class _AliasLoader:
    """Loads an old path as the module at its new path (imported first if need be)."""

    def __init__(self, new: str) -> None:
        self.new = new
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} is now {self.new}; the old path is an alias and will go away",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the alias spec on the module: give it back its own
        if self._spec is not None:
            module.__spec__ = self._spec


class _AliasFinder:
    """Finds the old paths of :data:`MOVED`, and nothing else."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))  # type: ignore[arg-type]


def install() -> None:
    """Put the alias finder on :data:`sys.meta_path`, once. First: an old package path
    (``cronwarden.alerting``) resolves to a package whose ``__path__`` holds the old submodules'
    files, which the path finder would otherwise load a second time under their old names."""
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
