"""``cronwarden doctor``: live preflight against the configured provider (see
:mod:`cronwarden.doctor`). Mounted by :mod:`cronwarden.cli` with one line."""

from __future__ import annotations

import sys

import click

from .durations import parse_duration


@click.command()
@click.option("--jobs", "-j", "jobs_target", required=True, help="Job module (dotted or .py).")
@click.option(
    "--provider",
    envvar="CRONWARDEN_PROVIDER",
    default="local",
    show_default=True,
    help="local | gcp | azure | postgres ($CRONWARDEN_PROVIDER).",
)
@click.option(
    "--config",
    envvar="CRONWARDEN_ALERTING_CONFIG",
    type=click.Path(dir_okay=False),
    help="Alerting settings (TOML); default $CRONWARDEN_ALERTING_CONFIG or the environment.",
)
@click.option(
    "--watcher-max-age",
    default="15m",
    show_default=True,
    help="Fail when the watcher's last check is older than this.",
)
@click.option(
    "--probe-timeout",
    default=60.0,
    show_default=True,
    help="Seconds to wait for the queue probe to come back.",
)
@click.option(
    "--worker-wait",
    default=5.0,
    show_default=True,
    help="Seconds to let a running worker answer the probe before doctor receives it itself.",
)
def doctor(
    jobs_target: str,
    provider: str,
    config: str | None,
    watcher_max_age: str,
    probe_timeout: float,
    worker_wait: float,
) -> None:
    """Preflight: store, queue round trip, dead letters, schedules, watcher, notifiers.

    One line per check, with the fix; exit 1 on any failure. Never runs a job."""
    from .alerting.settings import load_settings
    from .config import load_jobs, provider_from_env
    from .doctor import Doctor, failed
    from .logs import configure

    configure()
    jobs = load_jobs(jobs_target)
    alerting = load_settings(config)
    prov = provider_from_env(provider)
    try:
        checks = Doctor(
            jobs,
            prov,
            alerting=alerting,
            watcher_max_age=parse_duration(watcher_max_age, field="--watcher-max-age"),
            probe_timeout=probe_timeout,
            worker_wait=worker_wait,
        ).run()
    finally:
        prov.close()
    for check in checks:
        click.echo(check.line())
    bad = failed(checks)
    click.echo(f"{len(checks)} checks, {len(bad)} failed")
    if bad:
        sys.exit(1)


@click.command()
@click.option("--jobs", "-j", "jobs_target", required=True, help="Job module (dotted or .py).")
@click.option(
    "--provider",
    envvar="CRONWARDEN_PROVIDER",
    default="local",
    show_default=True,
    help="local | gcp | azure | postgres ($CRONWARDEN_PROVIDER).",
)
@click.option(
    "--config",
    envvar="CRONWARDEN_ALERTING_CONFIG",
    type=click.Path(dir_okay=False),
    help="Alerting settings (TOML); default $CRONWARDEN_ALERTING_CONFIG or the environment.",
)
@click.argument("job_name")
def drill(jobs_target: str, provider: str, config: str | None, job_name: str) -> None:
    """Force a failure (its alert must reach every notifier JOB routes to) and an overlap (the
    second run must be refused and logged naming the holder) on a shadow of JOB_NAME; the
    real job's windows, counters and records are not touched. Exit 1 if either fails."""
    from .alerting.settings import load_settings
    from .config import load_jobs, provider_from_env
    from .drill import Drill
    from .logs import configure

    configure()
    jobs = load_jobs(jobs_target)
    job = jobs.get(job_name)
    if job is None:
        known = ", ".join(j.name for j in jobs) or "none"
        raise click.UsageError(f"unknown job {job_name!r} (known: {known})")
    router = load_settings(config).router()
    prov = provider_from_env(provider)
    try:
        report = Drill(job, prov.store(), router).run()
    finally:
        prov.close()
    for step in report.steps:
        click.echo(step.line())
    if not report.ok:
        sys.exit(1)
