"""``cronwarden deploy``: render and check deployments (mounted lazily by ``cronwarden.cli``)."""

from __future__ import annotations

from pathlib import Path

import click

from cronwarden.errors import CronwardenError


class _Fail(click.ClickException):
    """One clear line, exit status 2 (as the main CLI)."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"error: {self.message}", err=True)


@click.group()
def deploy() -> None:
    """Render Terraform + function packages for GCP, Azure or AWS, and check them offline."""


@deploy.command()
@click.option(
    "--provider",
    "-p",
    type=click.Choice(["gcp", "azure", "aws"]),
    required=True,
    help="Cloud that runs the jobs.",
)
@click.option(
    "--jobs",
    "-j",
    "jobs_target",
    envvar="CRONWARDEN_JOBS",
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
    type=click.Choice(["gcp", "azure", "aws"]),
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
def render(
    provider: str,
    jobs_target: str,
    out: Path,
    watcher_provider: str | None,
    prefix: str,
    wheel: Path | None,
    requirements: Path | None,
    gcp_worker: str | None,
) -> None:
    """Render the Terraform root module(s) and function package(s) for the jobs of MODULE."""
    from .render import render as do_render

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
