"""``cronwarden doctor``: live preflight against the configured provider (see
:mod:`cronwarden.ops.doctor`). Mounted by :mod:`cronwarden.cli` with one line."""

from __future__ import annotations

import sys

import click

from ..model.durations import parse_duration
from .common import JOBS, PROVIDER, setup


@click.command()
@JOBS
@PROVIDER
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
    from ..ops.doctor import Doctor, failed
    from ..watch.alerting.settings import load_settings

    alerting = load_settings(config)
    jobs, prov = setup(jobs_target, provider)
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
@JOBS
@PROVIDER
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
    from ..ops.drill import Drill
    from ..watch.alerting.settings import load_settings

    router = load_settings(config).router()
    jobs, prov = setup(jobs_target, provider, job_name=job_name)
    job = jobs[job_name]
    try:
        report = Drill(job, prov.store(), router).run()
    finally:
        prov.close()
    for step in report.steps:
        click.echo(step.line())
    if not report.ok:
        sys.exit(1)
