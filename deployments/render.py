"""``cronwarden deploy render``: a Terraform root module and the function package for one cloud.

Output (``<out>``)::

    README.md                  what was rendered, the per-job table, notes, the commands to run
    versions.tf variables.tf main.tf outputs.tf terraform.tfvars.example
    modules/common/settings    provider-free checks of the per-job settings
    modules/<provider>/...     the reusable modules (copied from cronwarden's deployments/)
    function/                  the function source package
    function.zip               the same, zipped reproducibly (uploaded by main.tf on GCP)
    watcher/                   with --watcher-provider other than --provider: a second root
                               module + package running only the liveness watcher there

Re-rendering into the same folder replaces only what it wrote (marked by ``.cronwarden-render``);
Terraform's own files (``.terraform/``, state, ``terraform.tfvars``) are left alone.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronwarden.model.errors import ConfigurationError

from . import hcl, renderers
from .package import JobSource, job_source, write_package, zip_folder
from .readme import root_readme, tfvars_example
from .renderers import CloudRenderer, RootOptions
from .spec import GCP_WORKERS, Plan, plan

MARKER = ".cronwarden-render"
_GENERATED = (
    "README.md",
    "versions.tf",
    "variables.tf",
    "main.tf",
    "outputs.tf",
    "terraform.tfvars.example",
    "function.zip",
    "modules",
    "function",
    "watcher",
    MARKER,
)


@dataclass(frozen=True)
class Rendered:
    """What :func:`render` wrote."""

    out: Path
    plan: Plan
    roots: tuple[Path, ...]  #: Terraform root modules (the jobs', then the watcher's if apart)
    files: tuple[Path, ...]


def _version() -> str:
    import cronwarden

    return cronwarden.__version__


def _prepare(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise ConfigurationError(
            f"--out {out} is not empty and was not rendered by cronwarden; choose an empty folder"
        )
    out.mkdir(parents=True, exist_ok=True)
    for name in _GENERATED:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    (out / MARKER).write_text(
        "Rendered by `cronwarden deploy render`; re-rendering replaces the generated files.\n"
    )


def _copy_modules(renderer: CloudRenderer, out: Path) -> None:
    for part, source in renderer.module_sources().items():
        shutil.copytree(
            source,
            out / "modules" / part,
            ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"),
        )


def _write(folder: Path, name: str, items: Sequence[hcl.Item]) -> None:
    (folder / name).write_text(hcl.render(items), encoding="utf-8")


def _gcp_env_for_azure_watcher(prefix: str) -> dict[str, Any]:
    """Deprecated: ``renderers.get("gcp").watched_by(prefix, "azure").environment``."""
    return renderers.get("gcp").watched_by(prefix, "azure").environment


def _root(
    folder: Path,
    provider: str,
    the_plan: Plan,
    source: JobSource,
    *,
    prefix: str,
    watcher_here: bool,
    watcher_only: bool,
    wheel: Path | None,
    extra_requirements: str,
    gcp_worker: str = "push",
    watched: CloudRenderer | None = None,
    watcher_provider: str = "",
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    renderer = renderers.get(provider)
    _copy_modules(renderer, folder)
    options = RootOptions(
        prefix=prefix,
        plan=the_plan,
        watcher_here=watcher_here,
        watcher_only=watcher_only,
        watched=watched,
        worker=gcp_worker,
        source=source,
        watcher_provider=watcher_provider,
    )
    for name, items in renderer.root(options).items():
        _write(folder, name, items)
    external = options.external_watcher
    if watcher_only and watched is not None:
        needs = (*watched.watcher_requirements, *watched.watched_by(prefix, provider).requirements)
        reads = "".join(f"{line}\n" for line in dict.fromkeys(needs))
        extra_requirements = reads + extra_requirements
    package = folder / "function"
    write_package(
        package,
        provider,
        the_plan,
        source,
        _version(),
        wheel,
        extra_requirements,
        worker=not watcher_only,
    )
    zip_folder(package, folder / "function.zip")
    if renderer.readme is not None:
        readme = renderer.readme(the_plan, source, options)
    else:
        readme = root_readme(
            provider,
            the_plan,
            source,
            prefix=prefix,
            watcher_here=watcher_here,
            watcher_only=watcher_only,
            gcp_worker=gcp_worker if provider == "gcp" and not watcher_only else "push",
            watcher_provider=watcher_provider,
        )
    (folder / "README.md").write_text(readme, encoding="utf-8")
    if renderer.tfvars_example is not None:
        tfvars = renderer.tfvars_example(options)
    else:
        tfvars = tfvars_example(
            provider,
            watcher_only=watcher_only,
            external_watcher=external,
            watcher_provider=watcher_provider,
        )
    (folder / "terraform.tfvars.example").write_text(tfvars, encoding="utf-8")


#: job names the deployment's own schedules take (``<prefix>-watcher``...)
_RESERVED_JOB_NAMES = ("watcher", "ext-watcher")
#: the longest EventBridge Scheduler schedule name (``<prefix>-<job>`` is cut to it)
_AWS_SCHEDULE_NAME = 64


def _check_resource_names(the_plan: Plan, provider: str, prefix: str) -> None:
    """Refuse job names whose cloud resources would clash: with the watcher's own schedule,
    or (AWS) with each other once ``<prefix>-<job>`` is cut to 64 characters. Caught here, a
    clash is one line; at ``terraform apply`` it is a half-made deployment."""
    for spec in the_plan.jobs:
        if spec.name in _RESERVED_JOB_NAMES:
            raise ConfigurationError(
                f"job {spec.name!r}: its scheduler would be named {prefix}-{spec.name}, the "
                "deployment's own watcher schedule; rename the job"
            )
    if provider != "aws":
        return
    seen: dict[str, str] = {}
    for spec in the_plan.jobs:
        name = f"{prefix}-{spec.name}"[:_AWS_SCHEDULE_NAME]
        if name in seen:
            raise ConfigurationError(
                f"jobs {seen[name]!r} and {spec.name!r}: their EventBridge schedules would both "
                f"be named {name!r} (cut to {_AWS_SCHEDULE_NAME} characters); shorten one of "
                "the names or --name"
            )
        seen[name] = spec.name


def render(
    provider: str,
    jobs_target: str,
    out: Path | str,
    *,
    watcher_provider: str | None = None,
    prefix: str = "cronwarden",
    wheel: Path | str | None = None,
    requirements: Path | str | None = None,
    gcp_worker: str | None = None,
) -> Rendered:
    """Render the deployment of the jobs in ``jobs_target`` for ``provider`` into ``out``.

    ``watcher_provider`` (default: ``provider``) puts the liveness watcher in that cloud; when
    it differs, ``<out>/watcher/`` is a second root module. ``wheel`` vendors a cronwarden wheel
    into the package instead of pinning the released version; ``requirements`` (a requirements
    file) is appended to the package's ``requirements.txt``. ``gcp_worker`` (``--provider gcp``
    only): ``push`` (default: a Cloud Function, runs up to 570 s) or ``pull`` (no worker
    function; a pull subscription for ``python -m cronwarden.adapters.gcp.serve``). Raises
    :class:`~cronwarden.model.errors.CronwardenError` subclasses with one clear sentence.
    """
    from cronwarden.jobs.config import load_module
    from cronwarden.jobs.definitions import JobSet

    jobs_cloud = renderers.get(provider)
    watcher = watcher_provider or provider
    renderers.get(watcher, "watcher provider")
    if gcp_worker is not None and provider != "gcp":
        raise ConfigurationError("--gcp-worker applies only to --provider gcp (the jobs' cloud)")
    worker = gcp_worker or "push"
    if worker not in GCP_WORKERS:
        raise ConfigurationError(f"unknown --gcp-worker {worker!r}; choose push or pull")
    if not prefix.replace("-", "").isalnum() or not prefix[:1].isalpha() or len(prefix) > 12:
        raise ConfigurationError(
            f"--name {prefix!r}: use up to 12 lowercase letters, digits and '-', starting with "
            "a letter"
        )
    wheel_path = Path(wheel).resolve() if wheel else None
    if wheel_path is not None and not wheel_path.is_file():
        raise ConfigurationError(f"--wheel {wheel} does not exist")
    extra = ""
    if requirements is not None:
        try:
            extra = Path(requirements).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"--requirements {requirements}: {exc.strerror}") from None
    module = load_module(jobs_target)
    jobs = JobSet.from_module(module)
    the_plan = plan(
        jobs, tuple(dict.fromkeys([provider, watcher])), jobs_on=provider, gcp_worker=worker
    )
    _check_resource_names(the_plan, provider, prefix)
    source = job_source(jobs_target, module)
    target = Path(out)
    if source.is_package and target.resolve().is_relative_to(source.path.resolve()):
        raise ConfigurationError(
            f"--out {out} lies inside the job package {source.path}, which the function "
            "package copies: render outside it"
        )
    _prepare(target)
    roots = [target]
    _root(
        target,
        provider,
        the_plan,
        source,
        prefix=prefix,
        watcher_here=watcher == provider,
        watcher_only=False,
        wheel=wheel_path,
        extra_requirements=extra,
        gcp_worker=worker,
        watcher_provider=watcher,
    )
    if watcher != provider:
        roots.append(target / "watcher")
        _root(
            target / "watcher",
            watcher,
            the_plan,
            source,
            prefix=prefix,
            watcher_here=True,
            watcher_only=True,
            wheel=wheel_path,
            extra_requirements=extra,
            watched=jobs_cloud,
        )
    files = tuple(
        sorted(p for p in target.rglob("*") if p.is_file() and ".terraform" not in p.parts)
    )
    return Rendered(target, the_plan, tuple(roots), files)


__all__ = ["MARKER", "Rendered", "render"]
