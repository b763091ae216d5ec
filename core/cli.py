"""The ``cronwarden`` command line. Loaded only when the CLI runs (click and rich are not
imported by ``import cronwarden``)."""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import UTC, datetime
from typing import Any, NoReturn

import click

from .cli_crontab import mount as mount_crontab
from .cli_dashboard import dashboard
from .cli_doctor import doctor, drill
from .cli_ledger import ledger
from .cli_notify import notify
from .cli_pause import register as register_pause
from .errors import CronwardenError
from .hosting.settings import JOBS_ENV, PROVIDER_ENV, WEBHOOK_ENV
from .redaction import redact

JOBS = click.option(
    "--jobs",
    "-j",
    "jobs_target",
    envvar=JOBS_ENV,
    required=True,
    metavar="MODULE",
    help="Job module: a dotted name or a .py path (or $CRONWARDEN_JOBS).",
)
_PROVIDER = click.option(
    "--provider",
    "-p",
    envvar=PROVIDER_ENV,
    default="local",
    show_default=True,
    help="local, gcp, azure, aws or postgres (or $CRONWARDEN_PROVIDER).",
)
_DSN = click.option(
    "--dsn",
    expose_value=False,
    callback=lambda ctx, _param, value: ctx.meta.__setitem__(_DSN_KEY, value) if value else None,
    help="PostgreSQL DSN for --provider postgres (prefer $CRONWARDEN_POSTGRES_DSN: other users "
    "can read a command line).",
)
_DSN_KEY = "cronwarden.dsn"


def PROVIDER(command: Any) -> Any:
    """``--provider`` and ``--dsn``."""
    return _PROVIDER(_DSN(command))


class _Fail(click.ClickException):
    """One clear line, exit status 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {redact(self.message)}", err=True)


def _setup(jobs_target: str | None, provider_name: str) -> tuple[Any, Any]:
    from .config import load_jobs, provider_from_env
    from .logs import configure

    configure()
    jobs = load_jobs(jobs_target) if jobs_target else None
    options: dict[str, Any] = {}
    dsn = click.get_current_context().meta.get(_DSN_KEY)
    if dsn:
        if provider_name.strip().lower() != "postgres":
            raise _Fail("--dsn applies to --provider postgres only")
        options["dsn"] = dsn
    return jobs, provider_from_env(provider_name, **options)


def _parse_time(text: str | None, name: str) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _Fail(f"{name}: {text!r} is not an ISO time like 2026-01-20T02:00Z") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _job(jobs: Any, name: str) -> Any:
    job = jobs.get(name)
    if job is None:
        known = ", ".join(j.name for j in jobs) or "none"
        raise _Fail(f"unknown job {name!r} (known: {known})")
    return job


@click.group()
@click.version_option(package_name="cronwarden")
def cli() -> None:
    """Scheduled jobs that run once per window, never overlap and never fail silently."""


cli.add_command(notify)
mount_crontab(cli)
cli.add_command(doctor)
cli.add_command(drill)
register_pause(cli)
cli.add_command(ledger)
cli.add_command(dashboard)


@cli.command()
@JOBS
@PROVIDER
@click.option("--workers", default=2, show_default=True, help="Worker threads.")
@click.option(
    "--once",
    is_flag=True,
    help="Run every job's latest due window, work the queue until it is empty, report, and exit.",
)
@click.option("--metrics-port", type=int, help="Serve Prometheus text on this port (/metrics).")
def run(
    jobs_target: str, provider: str, workers: int, once: bool, metrics_port: int | None
) -> None:
    """Run the jobs of MODULE: scheduler, workers and liveness watcher in one process."""
    from .liveness import Watcher
    from .metrics_prometheus import serve_runner_metrics
    from .runtime import LocalRunner

    jobs, prov = _setup(jobs_target, provider)
    runner = LocalRunner(jobs, prov, workers=workers)
    metrics = None if metrics_port is None else serve_runner_metrics(runner, metrics_port)
    try:
        if not once:
            runner.serve()
            return
        runner.fire_due()
        runner.drain()
        report = Watcher(jobs, runner.store, runner.queue, notifiers=[]).check()
        _print_status(report)
    finally:
        if metrics is not None:
            metrics.close()
        prov.close()


@cli.command()
@JOBS
@PROVIDER
@click.argument("job_name")
@click.option("--window", help="Window to run (ISO, UTC); default: the latest due window.")
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Also work the queue until it is empty.",
)
def trigger(jobs_target: str, provider: str, job_name: str, window: str | None, wait: bool) -> None:
    """Trigger one window of JOB_NAME by hand."""
    from .runtime import LocalRunner

    jobs, prov = _setup(jobs_target, provider)
    job = _job(jobs, job_name)
    try:
        runner = LocalRunner(jobs, prov, workers=1)
        when = _parse_time(window, "--window") or runner.engine.now()
        requests = runner.trigger.tick(job.name, when, reason="manual")
        for request in requests:
            click.echo(f"enqueued {request.run_key}")
        if wait:
            runner.drain()
            _print_history(runner.store, job, limit=len(requests) + 2)
    finally:
        prov.close()


@cli.command()
@JOBS
@PROVIDER
def status(jobs_target: str, provider: str) -> None:
    """Jobs, schedules, last success, next expected run, state, failures, DLQ depth."""
    from .liveness import Watcher

    jobs, prov = _setup(jobs_target, provider)
    try:
        store, queue = prov.store(), prov.queue()
        watcher = Watcher(jobs, store, queue, notifiers=[])
        from .ports import STATUS

        health, _ = watcher.evaluate(store.query(STATUS), watcher.clock(), None)
        from .liveness import Report

        _print_status(Report(health, queue.dlq_depth(), [], [], []))
    finally:
        prov.close()


@cli.command()
@JOBS
@PROVIDER
@click.option(
    "--webhook",
    envvar=WEBHOOK_ENV,
    help="Also POST alerts here (Slack-compatible; or $CRONWARDEN_WEBHOOK_URL).",
)
def check(jobs_target: str, provider: str, webhook: str | None) -> None:
    """Evaluate liveness; notify transitions; exit 1 while any alert is active."""
    from .liveness import Watcher
    from .notify import LogNotifier, Notifier, WebhookNotifier

    jobs, prov = _setup(jobs_target, provider)
    notifiers: list[Notifier] = [LogNotifier()]
    if webhook:
        notifiers.append(WebhookNotifier(webhook))
    try:
        report = Watcher(jobs, prov.store(), prov.queue(), notifiers=notifiers).check()
    finally:
        prov.close()
    for alert in report.active:
        click.echo(f"ALERT {alert.kind.value}: {alert.text}")
    if not report.ok:
        sys.exit(1)
    click.echo(f"ok: {len(report.jobs)} job(s) healthy")


@cli.command()
@JOBS
@PROVIDER
@click.argument("job_name")
@click.option("--limit", default=20, show_default=True)
def history(jobs_target: str, provider: str, job_name: str, limit: int) -> None:
    """The latest runs of JOB_NAME, newest first."""
    jobs, prov = _setup(jobs_target, provider)
    try:
        _print_history(prov.store(), _job(jobs, job_name), limit=limit)
    finally:
        prov.close()


@cli.group()
def dlq() -> None:
    """Inspect and redrive the dead-letter queue."""


@dlq.command("list")
@PROVIDER
@click.option("--limit", default=20, show_default=True)
def dlq_list(provider: str, limit: int) -> None:
    """Dead letters with their reasons (not consumed)."""
    from rich.console import Console
    from rich.table import Table

    _, prov = _setup(None, provider)
    try:
        queue = prov.queue()
        letters, depth = queue.dlq_peek(limit), queue.dlq_depth()
    finally:
        prov.close()
    table = Table(title=f"dead-letter queue: {depth} message(s)")
    for column in ("message id", "run key", "reason", "attempts", "description"):
        table.add_column(column)
    for letter in letters:
        table.add_row(
            letter.message_id,
            letter.attributes.get("run_key", "?"),
            letter.reason,
            str(letter.attempts),
            redact(letter.description)[:120],
        )
    Console().print(table)


@dlq.command("show")
@PROVIDER
@click.argument("message_id")
def dlq_show(provider: str, message_id: str) -> None:
    """One dead letter in full (body, attributes, reason)."""
    _, prov = _setup(None, provider)
    try:
        letters = prov.queue().dlq_peek(1000)
    finally:
        prov.close()
    for letter in letters:
        if letter.message_id == message_id:
            click.echo(
                json.dumps(
                    {
                        "message_id": letter.message_id,
                        "reason": letter.reason,
                        "description": redact(letter.description),
                        "attempts": letter.attempts,
                        "attributes": letter.attributes,
                        "body": redact(letter.body.decode("utf-8", "replace")),
                    },
                    indent=2,
                    ensure_ascii=False,
                )
            )
            return
    raise _Fail(f"no dead letter with message id {message_id!r}")


@dlq.command("redrive")
@PROVIDER
@click.option("--limit", default=10, show_default=True, help="At most this many messages.")
def dlq_redrive(provider: str, limit: int) -> None:
    """Move dead letters back to the queue, in a capped batch. Fix the cause first."""
    if limit < 1:
        raise _Fail("--limit must be at least 1")
    _, prov = _setup(None, provider)
    try:
        moved = prov.queue().redrive(limit)
    finally:
        prov.close()
    click.echo(f"redrove {moved} message(s)")


@cli.command()
@JOBS
@PROVIDER
@click.argument("job_name")
@click.option("--from", "start", required=True, help="First window (ISO, UTC).")
@click.option("--to", "end", help="Last window (ISO, UTC); default: now.")
@click.option("--limit", default=100, show_default=True, help="At most this many windows.")
@click.option("--wait/--no-wait", default=False, help="Also work the queue until empty.")
def backfill(
    jobs_target: str,
    provider: str,
    job_name: str,
    start: str,
    end: str | None,
    limit: int,
    wait: bool,
) -> None:
    """Enqueue windows of JOB_NAME that never ran, oldest first."""
    from rich.progress import Progress

    from .backfill import missing_windows
    from .model import RunRequest
    from .runtime import LocalRunner

    jobs, prov = _setup(jobs_target, provider)
    job = _job(jobs, job_name)
    try:
        runner = LocalRunner(jobs, prov, workers=1)
        first = _parse_time(start, "--from")
        last = _parse_time(end, "--to") or runner.engine.now()
        assert first is not None
        windows = missing_windows(runner.store, job, first, last, limit=limit)
        with Progress(transient=False) as progress:
            task = progress.add_task(f"backfill {job.name}", total=len(windows))
            for window in windows:
                runner.trigger.publish(RunRequest(job.name, window, reason="backfill"))
                progress.advance(task)
        click.echo(f"enqueued {len(windows)} window(s)")
        if wait:
            runner.drain()
    finally:
        prov.close()


def _print_status(report: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from .liveness import _fmt

    table = Table(title="cronwarden jobs")
    for column in (
        "job",
        "schedule",
        "last success",
        "next expected",
        "state",
        "failures",
        "duration (p50 / p95)",
        "alerts",
    ):
        table.add_column(column)
    for item in report.jobs:
        st = item.status
        table.add_row(
            item.job.name,
            f"{item.job.schedule.cron} ({item.job.schedule.timezone})",
            _fmt(item.last_success),
            _fmt(item.expected_next),
            item.state_text,
            str(st.get("consecutive_failures") or 0),
            item.duration_text,
            ", ".join(c.value for c in item.conditions) or "ok",
        )
    console = Console()
    console.print(table)
    if report.dlq_depth is not None:
        console.print(f"dead-letter queue depth: {report.dlq_depth}")


def _print_history(store: Any, job: Any, *, limit: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from .ports import RUN
    from .records import RunRecord

    records = store.query(RUN, job.name)[-limit:][::-1]
    table = Table(title=f"history of {job.name}")
    for column in ("window", "state", "attempt", "run id", "duration ms", "error"):
        table.add_column(column)
    for record in records:
        run = RunRecord.from_data(record.data)
        table.add_row(
            record.key.id,
            run.state.value,
            str(run.attempt),
            run.run_id,
            "" if run.duration_ms is None else str(run.duration_ms),
            redact(run.error or "")[:80],
        )
    Console().print(table)


def _mount_emulators() -> None:
    from cronwarden.emulators.cli import emulators

    cli.add_command(emulators)


def _mount_deploy() -> None:
    from cronwarden.deploy.cli import deploy

    cli.add_command(deploy)


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point: clear one-line errors and non-zero exits instead of tracebacks."""
    with contextlib.suppress(ImportError):
        _mount_emulators()
    with contextlib.suppress(ImportError):
        _mount_deploy()
    try:
        cli.main(args=argv, prog_name="cronwarden", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (CronwardenError, ValueError, KeyError, OSError) as exc:
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        click.echo(f"error: {redact(str(text))}", err=True)
        sys.exit(2)
    sys.exit(0)
