"""The per-cloud renderers, found by provider name.

The render driver (:mod:`cronwarden.deploy.render`) knows no cloud: it asks this registry for
the :class:`CloudRenderer` of ``--provider`` (and of ``--watcher-provider``) and writes what it
returns. Each cloud's renderer lives next to its adapter (``cronwarden.adapters.gcp.deploy``,
``cronwarden.adapters.azure.deploy``) and is imported only when asked for.

Adding a cloud needs no edit here nor in the driver: ship a module with a
:class:`CloudRenderer` (its ``jobs_root`` and ``watcher_root`` functions, what a watcher elsewhere
needs, and its Terraform modules folder) and either call :func:`register` (``register("mycloud",
"pkg.deploy:RENDERER")``) or declare the entry point
``[project.entry-points."cronwarden.deploy.renderers"] mycloud = "pkg.module:RENDERER"``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cronwarden.hosting.settings import PROVIDER_ENV as PROVIDER_ENV
from cronwarden.model.errors import ConfigurationError

from . import files
from .hcl import Item

if TYPE_CHECKING:  # spec and package import this module
    from .package import JobSource
    from .spec import Plan

ENTRY_POINT_GROUP = "cronwarden.deploy.renderers"

_BUILTIN = {
    "gcp": "cronwarden.adapters.gcp.deploy:RENDERER",
    "azure": "cronwarden.adapters.azure.deploy:RENDERER",
    "aws": "cronwarden.adapters.aws.deploy:RENDERER",
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
    source: JobSource | None = None  #: the job module (for workers that import it by name)
    #: the cloud running the watcher (``""``: unknown, the renderer's ``watcher_host``); a jobs
    #: root with an external watcher renders the access of a watcher in that cloud
    watcher_provider: str = ""

    @property
    def external_watcher(self) -> bool:
        """The jobs run here and their watcher runs in another cloud."""
        return not self.watcher_here and not self.watcher_only


TfFiles = Mapping[str, Sequence[Item]]  #: a root module's ``.tf`` files: file name => items


def tf_files(
    versions: Sequence[Item],
    variables: Sequence[Item],
    main: Sequence[Item],
    outputs: Sequence[Item],
) -> TfFiles:
    """The four files of a rendered root module."""
    return {
        "versions.tf": versions,
        "variables.tf": variables,
        "main.tf": main,
        "outputs.tf": outputs,
    }


@dataclass(frozen=True)
class Watched:
    """What a watcher running in another cloud needs to watch a cloud's jobs: the variables its
    root module declares, and the environment (whose values may reference them)."""

    variables: list[Item]
    environment: dict[str, Any]
    #: environment name => the variable naming the secret that holds its value in the watcher
    #: cloud's secret store (credentials by reference: the value never enters Terraform)
    secret_environment: Mapping[str, str] = field(default_factory=dict)
    cloud: str = ""  #: the jobs' cloud
    #: requirements the watcher's package needs to read the jobs' cloud from this host
    requirements: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobLimits:
    """One job's bounds as a cloud sees them (seconds), for :attr:`CloudRenderer.check_job`."""

    name: str
    runtime: int
    attempts: int
    min_backoff: int
    max_backoff: int
    worker: str  #: the worker style asked for (GCP: push or pull)


@dataclass(frozen=True)
class PackageFiles:
    """A cloud's share of the function package: its entry files (name => text) and the
    requirements pinned after cronwarden's."""

    files: dict[str, str]
    pins: tuple[str, ...] = ()


def no_clamps(job: JobLimits) -> list[str]:
    """A cloud that takes every job as declared: no notes."""
    return []


@dataclass(frozen=True)
class CloudRenderer:
    """One cloud's share of ``cronwarden deploy render``: plain functions, no cloud named here.

    ``jobs_root`` renders the root module running the jobs (and the watcher when
    ``options.watcher_here``); ``watcher_root(prefix, watched)`` the root module running only
    the watcher of another cloud's jobs. A watcher running in cloud ``watcher_host`` (the one
    whose identity federation is rendered) can watch this cloud's jobs; it declares
    ``watcher_variables()`` and gets ``watcher_environment(prefix)``. The Terraform modules
    copied into the output are ``common/settings`` and the folder named like the cloud.
    """

    name: str
    jobs_root: Callable[[RootOptions], TfFiles]
    watcher_root: Callable[[str, Watched], TfFiles]
    watcher_host: str
    watcher_variables: Callable[[], list[Item]]
    watcher_environment: Callable[[str], dict[str, Any]]

    modules_dir: Path | None = None  #: its Terraform modules (default: terraform/<name> here)
    #: the notes (clamps a user should know) for a job running here; raises
    #: InvalidJobDefinition, naming the job, when this cloud cannot run it
    check_job: Callable[[JobLimits], list[str]] = no_clamps
    #: (cron, time zone) => the cloud's own timer expression, when its timers need one
    timer_schedule: Callable[[str, str], str] | None = None
    #: (job name, cron, time zone) => raises InvalidJobDefinition, naming the job, when this
    #: cloud's scheduler cannot express it: checked by the plan, before anything is written
    check_schedule: Callable[[str, str, str], object] | None = None
    #: (plan, job source, runs the worker) => the function package's entry files
    package: Callable[[Plan, JobSource, bool], PackageFiles] | None = None
    #: more clouds whose watcher can watch this cloud's jobs (besides ``watcher_host``)
    watcher_hosts: tuple[str, ...] = ()
    #: what a watcher elsewhere reads from its own secret store (:attr:`Watched.secret_environment`)
    watcher_secrets: Callable[[], dict[str, str]] = dict
    #: requirements a watcher elsewhere needs to read this cloud (added to its package)
    watcher_requirements: tuple[str, ...] = ()
    #: (plan, job source, options) => README.md of a root module; default: cronwarden.deploy.readme
    readme: Callable[[Plan, JobSource, RootOptions], str] | None = None
    #: options => terraform.tfvars.example; default: cronwarden.deploy.readme
    tfvars_example: Callable[[RootOptions], str] | None = None
    #: (prefix, host) => what a watcher on ``host`` needs, when that host reads this cloud
    #: differently from the defaults above (e.g. another identity federation); None: defaults
    watched_from: Callable[[str, str], Watched | None] | None = None

    @property
    def terraform_modules(self) -> tuple[str, ...]:
        """The ``modules/`` folders a root module of this cloud uses."""
        return ("common/settings", self.name)

    def module_sources(self) -> dict[str, Path]:
        """``modules/`` folder => where it is copied from; :class:`ConfigurationError` when a
        folder is missing."""
        shipped = files.terraform_modules()
        sources = {"common/settings": shipped / "common/settings"}
        sources[self.name] = self.modules_dir or shipped / self.name
        for part, folder in sources.items():
            if not folder.is_dir():
                raise ConfigurationError(f"the {part!r} Terraform modules are missing: {folder}")
        return sources

    def root(self, options: RootOptions) -> TfFiles:
        """The ``.tf`` files of the root module described by ``options``."""
        if not options.watcher_only:
            return self.jobs_root(options)
        if options.watched is None:
            raise ConfigurationError("a watcher-only root module needs the jobs' cloud")
        return self.watcher_root(
            options.prefix, options.watched.watched_by(options.prefix, self.name)
        )

    def watched_by(self, prefix: str, host: str) -> Watched:
        """What a watcher running in cloud ``host`` needs to watch this cloud's jobs."""
        hosts = (self.watcher_host, *self.watcher_hosts)
        if host not in hosts:
            raise ConfigurationError(
                f"a watcher on {host!r} cannot watch jobs on {self.name!r} (its access is "
                f"rendered for a watcher on {' or '.join(repr(h) for h in hosts)} only)"
            )
        if self.watched_from is not None:
            special = self.watched_from(prefix, host)
            if special is not None:
                return special
        return Watched(
            self.watcher_variables(),
            self.watcher_environment(prefix),
            self.watcher_secrets(),
            self.name,
        )


def register(name: str, renderer: CloudRenderer | str) -> None:
    """Make ``renderer`` (or ``"module:attribute"`` naming it, imported on first use) the
    renderer of provider ``name``."""
    _registered[name] = renderer


def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def builtin_names() -> tuple[str, ...]:
    """The clouds cronwarden renders itself: ``("gcp", "azure", "aws")``."""
    return tuple(_BUILTIN)


def names() -> tuple[str, ...]:
    """Every provider with a renderer: the built-in ones first."""
    return tuple(dict.fromkeys([*_BUILTIN, *_entry_points(), *_registered]))


def choices() -> str:
    """``gcp or azure or aws``: the provider names for an error message."""
    return " or ".join(names())


def get(name: str, what: str = "provider") -> CloudRenderer:
    """The renderer of provider ``name``; :class:`ConfigurationError` if there is none."""
    found = _registered.get(name) or _BUILTIN.get(name) or _entry_points().get(name)
    if found is None:
        raise ConfigurationError(f"unknown {what} {name!r}; choose {choices()}")
    if isinstance(found, str):
        module, _, attribute = found.partition(":")
        found = getattr(importlib.import_module(module), attribute, None)
    if not isinstance(found, CloudRenderer):
        raise ConfigurationError(f"the renderer registered for {name!r} is not a CloudRenderer")
    return found


__all__ = [
    "ENTRY_POINT_GROUP",
    "CloudRenderer",
    "JobLimits",
    "PackageFiles",
    "RootOptions",
    "TfFiles",
    "Watched",
    "builtin_names",
    "choices",
    "get",
    "names",
    "no_clamps",
    "register",
    "tf_files",
]
