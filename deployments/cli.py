"""``cronwarden deploy``: render and check deployments (mounted lazily by ``cronwarden.cli``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from cronwarden.hosting.settings import JOBS_ENV
from cronwarden.model.errors import CronwardenError

from . import renderers


class _Fail(click.ClickException):
    """One clear line, exit status 2 (as the main CLI)."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"error: {self.message}", err=True)


if TYPE_CHECKING:
    _ParamType = click.ParamType[str]  # generic in click >= 8.2 (annotation only)
else:
    _ParamType = click.ParamType


KUBERNETES_PROVIDER = "postgres"  #: self-hosted: Kubernetes manifests for the Postgres provider
AWS_PROVIDER = "aws"  #: deprecated: a registered renderer like the others


class _Provider(_ParamType):
    """A provider with a renderer (:mod:`cronwarden.deploy.renderers`), looked up only when the
    option is given: listing registered clouds reads the installed packages' entry points,
    too slow for every ``cronwarden`` start."""

    name = "provider"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join([*renderers.builtin_names(), KUBERNETES_PROVIDER]) + "|...]"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value == KUBERNETES_PROVIDER:  # rendered by its own module
            return value
        try:
            renderers.get(value)
        except CronwardenError as exc:
            self.fail(str(exc), param, ctx)
        return value


@click.group()
def deploy() -> None:
    """Render Terraform + function packages for GCP, Azure or AWS, and check them offline."""


@deploy.command()
@click.option(
    "--provider",
    "-p",
    type=_Provider(),
    required=True,
    help="Cloud that runs the jobs (postgres: Kubernetes manifests for the Postgres provider).",
)
@click.option(
    "--jobs",
    "-j",
    "jobs_target",
    envvar=JOBS_ENV,
    required=True,
    metavar="MODULE",
    help="Job module: a dotted name or a .py path (or $CRONWARDEN_JOBS).",
)
@click.option(
    "--out",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for the root module and package (empty, or rendered before).",
)
@click.option(
    "--watcher-provider",
    type=_Provider(),
    default=None,
    help="Run the liveness watcher in this cloud (default: the jobs' cloud).",
)
@click.option(
    "--name",
    "prefix",
    default="cronwarden",
    show_default=True,
    help="Deployment name: prefix of resource names.",
)
@click.option(
    "--wheel",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Vendor this cronwarden wheel into the package instead of pinning the release.",
)
@click.option(
    "--requirements",
    "-r",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The jobs' own requirements file, appended to the package's requirements.txt.",
)
@click.option(
    "--gcp-worker",
    type=click.Choice(["push", "pull"]),
    default=None,
    help="GCP only: push (a Cloud Function; runs of at most 570 s, the default) or pull (no "
    "worker function: run `python -m cronwarden.adapters.gcp.serve` on your own host).",
)
@click.option(
    "--replicas",
    type=click.IntRange(1, 100),
    default=3,
    show_default=True,
    help="postgres only: replicas of `cronwarden run` in the Deployment.",
)
@click.option(
    "--image",
    default=None,
    help="postgres only: the image the Deployment and CronJob run (built from the rendered "
    "Dockerfile).",
)
def render(
    provider: str,
    jobs_target: str,
    out: Path,
    watcher_provider: str | None,
    prefix: str,
    wheel: Path | None,
    requirements: Path | None,
    gcp_worker: str | None,
    replicas: int,
    image: str | None,
) -> None:
    """Render the Terraform root module(s) and function package(s) for the jobs of MODULE
    (for postgres: Kubernetes manifests, a Dockerfile and the steps)."""
    from .render import render as do_render

    if provider == KUBERNETES_PROVIDER:
        if wheel or requirements or gcp_worker:
            raise _Fail("--wheel, --requirements and --gcp-worker apply to gcp and azure only")
        _render_kubernetes(jobs_target, out, prefix, replicas, image, watcher_provider)
        return
    try:
        result = do_render(
            provider,
            jobs_target,
            out,
            watcher_provider=watcher_provider,
            prefix=prefix,
            wheel=wheel,
            requirements=requirements,
            gcp_worker=gcp_worker,
        )
    except CronwardenError as exc:
        raise _Fail(str(exc)) from None
    for note in result.plan.notes:
        click.echo(f"note: {note}", err=True)
    for root in result.roots:
        click.echo(f"rendered {root} ({len(result.plan.jobs)} job(s))")
    click.echo(f"next: see {result.out / 'README.md'}")


def _render_kubernetes(
    jobs_target: str,
    out: Path,
    prefix: str,
    replicas: int,
    image: str | None,
    watcher_provider: str | None,
) -> None:
    from .kubernetes import render_kubernetes

    if watcher_provider not in (None, "postgres"):
        raise _Fail("--watcher-provider: the Kubernetes recipe runs its watcher as a CronJob")
    try:
        result = render_kubernetes(jobs_target, out, prefix=prefix, replicas=replicas, image=image)
    except CronwardenError as exc:
        raise _Fail(str(exc)) from None
    click.echo(f"rendered {result.out} ({result.jobs} job(s), {replicas} replica(s))")
    click.echo(f"next: see {result.out / 'README.md'}")


@deploy.command()
@click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--checkov/--no-checkov", default=False, help="Also run checkov (offline).")
@click.option(
    "--schemas/--no-schemas",
    default=True,
    show_default=True,
    help="Check against the pinned provider schemas (installs them with npm on first use).",
)
def check(folder: Path, checkov: bool, schemas: bool) -> None:
    """Offline checks of FOLDER: parse, fmt, validate, provider schemas, modules, secrets."""
    from .check import run_checks

    try:
        report = run_checks(folder, schemas=schemas, checkov=checkov)
    except CronwardenError as exc:
        raise _Fail(str(exc)) from None
    for line in report.lines():
        click.echo(line)
    if not report.ok:
        problems = sum(len(items) for items in report.findings.values())
        raise _Fail(f"{problems} problem(s) in {folder}")
    click.echo(f"ok: {folder}")


__all__ = ["deploy"]
