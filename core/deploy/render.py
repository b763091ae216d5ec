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

from cronwarden.errors import ConfigurationError

from . import azure, files, gcp, hcl
from .package import JobSource, job_source, write_package, zip_folder
from .readme import root_readme, tfvars_example
from .spec import AZURE_SKU, GCP_WORKERS, PROVIDERS, Plan, plan

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
_MODULES = {
    "gcp": ("common/settings", "gcp"),
    "azure": ("common/settings", "azure"),
}


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


def _index_config() -> dict[str, Any]:
    """Firestore indexes/TTL from the GCP adapter (``firestore.indexes.json`` shape)."""
    try:
        from cronwarden.adapters.gcp.indexes import index_config
    except ImportError:  # pragma: no cover - the GCP adapter always ships it
        return _fallback_index_config()
    config: dict[str, Any] = index_config()
    return config


def _fallback_index_config() -> dict[str, Any]:
    from cronwarden.ports import ITEM, KINDS, RUN

    indexes = [
        {
            "collectionGroup": f"cw_{kind}",
            "queryScope": "COLLECTION",
            "fields": [
                {"fieldPath": "job", "order": "ASCENDING"},
                {"fieldPath": "id", "order": "ASCENDING"},
            ],
        }
        for kind in KINDS
    ]
    overrides: list[dict[str, Any]] = []
    for kind in KINDS:
        overrides += [
            {"collectionGroup": f"cw_{kind}", "fieldPath": "d", "indexes": []},
            {"collectionGroup": f"cw_{kind}", "fieldPath": "rev", "indexes": []},
        ]
        if kind in (RUN, ITEM):
            overrides.append(
                {"collectionGroup": f"cw_{kind}", "fieldPath": "expire_at", "ttl": True}
            )
    return {"indexes": indexes, "fieldOverrides": overrides}


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


def _copy_modules(provider: str, out: Path) -> None:
    source = files.terraform_modules()
    for part in _MODULES[provider]:
        shutil.copytree(
            source / part,
            out / "modules" / part,
            ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"),
        )


def _write(folder: Path, name: str, items: Sequence[hcl.Item]) -> None:
    (folder / name).write_text(hcl.render(items), encoding="utf-8")


def _gcp_env_for_azure_watcher(prefix: str) -> dict[str, Any]:
    n = gcp.names(prefix)
    return {
        "CRONWARDEN_PROVIDER": "gcp",
        "CRONWARDEN_GCP_PROJECT": hcl.Expr("var.gcp_project"),
        "CRONWARDEN_GCP_TOPIC": n["topic"],
        "CRONWARDEN_GCP_SUBSCRIPTION": n["subscription"],
        "CRONWARDEN_GCP_DEAD_LETTER_TOPIC": n["dead_letter_topic"],
        "CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION": n["dead_letter_subscription"],
        "CRONWARDEN_FIRESTORE_DATABASE": hcl.Expr("var.gcp_firestore_database"),
        "CRONWARDEN_FIRESTORE_PREFIX": "cw_",
        "CRONWARDEN_GCP_WIF_PROVIDER": hcl.Expr("var.gcp_workload_identity_provider"),
        "CRONWARDEN_GCP_SERVICE_ACCOUNT": hcl.Expr("var.gcp_watcher_service_account"),
        "CRONWARDEN_GCP_WIF_AUDIENCE": hcl.Expr("var.gcp_watcher_audience"),
    }


def _azure_watcher_variables() -> list[hcl.Item]:
    def var(name: str, description: str, default: Any = ...) -> hcl.Block:
        body: list[hcl.Item] = [
            hcl.Attr("description", description),
            hcl.Attr("type", hcl.Expr("string")),
        ]
        if default is not ...:
            body.append(hcl.Attr("default", default))
        return hcl.Block("variable", (name,), body)

    return [
        *azure.variables(AZURE_SKU, watcher_only=True),
        var("gcp_project", "GCP project running the jobs."),
        var("gcp_firestore_database", "Firestore database id of the jobs.", "(default)"),
        var(
            "gcp_workload_identity_provider",
            "Workload identity provider trusting this app (output external_watcher_provider "
            "of the GCP root module).",
        ),
        var(
            "gcp_watcher_service_account",
            "Service account the watcher impersonates (output external_watcher_service_account).",
        ),
        var(
            "gcp_watcher_audience",
            "Audience of the Entra ID token presented to GCP.",
            "api://cronwarden-watcher",
        ),
    ]


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
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _copy_modules(provider, folder)
    external = not watcher_here and not watcher_only
    if provider == "gcp":
        _write(folder, "versions.tf", gcp.versions())
        if watcher_only:
            _write(folder, "variables.tf", gcp.watcher_variables())
            _write(folder, "main.tf", gcp.watcher_main(prefix))
            _write(folder, "outputs.tf", gcp.watcher_outputs())
        else:
            _write(folder, "variables.tf", gcp.variables(external_watcher=external))
            main = gcp.main(
                prefix, the_plan, _index_config(), watcher_here=watcher_here, worker=gcp_worker
            )
            _write(folder, "main.tf", main)
            _write(folder, "outputs.tf", gcp.outputs(watcher_here, gcp_worker))
    else:
        _write(folder, "versions.tf", azure.versions())
        if watcher_only:
            _write(folder, "variables.tf", _azure_watcher_variables())
            _write(folder, "main.tf", azure.watcher_main(_gcp_env_for_azure_watcher(prefix)))
            _write(folder, "outputs.tf", azure.outputs(watcher_only=True))
        else:
            sku = AZURE_SKU
            _write(folder, "variables.tf", azure.variables(sku, external_watcher=external))
            jobs = {spec.name: spec.terraform() for spec in the_plan.jobs}
            _write(folder, "main.tf", azure.main(jobs, watcher_here=watcher_here))
            _write(folder, "outputs.tf", azure.outputs(external_watcher=external))
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
    (folder / "README.md").write_text(
        root_readme(
            provider,
            the_plan,
            source,
            prefix=prefix,
            watcher_here=watcher_here,
            watcher_only=watcher_only,
            gcp_worker=gcp_worker if provider == "gcp" and not watcher_only else "push",
        ),
        encoding="utf-8",
    )
    (folder / "terraform.tfvars.example").write_text(
        tfvars_example(provider, watcher_only=watcher_only, external_watcher=external),
        encoding="utf-8",
    )


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
    :class:`~cronwarden.errors.CronwardenError` subclasses with one clear sentence.
    """
    from cronwarden.config import load_module
    from cronwarden.jobs import JobSet

    if provider == "aws" or watcher_provider == "aws":
        return _render_aws(
            provider, jobs_target, out, watcher_provider, prefix, wheel, requirements
        )
    if provider not in PROVIDERS:
        raise ConfigurationError(f"unknown provider {provider!r}; choose gcp or azure")
    watcher = watcher_provider or provider
    if watcher not in PROVIDERS:
        raise ConfigurationError(f"unknown watcher provider {watcher!r}; choose gcp or azure")
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
    source = job_source(jobs_target, module)
    target = Path(out)
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
        )
    files = tuple(
        sorted(p for p in target.rglob("*") if p.is_file() and ".terraform" not in p.parts)
    )
    return Rendered(target, the_plan, tuple(roots), files)


def _render_aws(
    provider: str,
    jobs_target: str,
    out: Path | str,
    watcher_provider: str | None,
    prefix: str,
    wheel: Path | str | None,
    requirements: Path | str | None,
) -> Rendered:
    """``--provider aws``: the AWS adapter renders its own root module."""
    if provider != "aws":
        raise ConfigurationError(
            f"--watcher-provider aws with --provider {provider} is not rendered yet; render the "
            "jobs' cloud alone and run `cronwarden check --provider aws` as the watcher"
        )
    try:
        from cronwarden.adapters.aws.deploy import render as render_aws
    except ImportError as exc:  # pragma: no cover - the adapter ships with cronwarden
        raise ConfigurationError(f"the AWS renderer is not available: {exc}") from exc
    result = render_aws(
        jobs_target,
        out,
        watcher_provider=watcher_provider,
        prefix=prefix,
        wheel=wheel,
        requirements_file=requirements,
    )
    return Rendered(result.out, result.plan, result.roots, result.files)


__all__ = ["MARKER", "Rendered", "render"]
