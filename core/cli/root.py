"""The ``cronwarden`` command line. Loaded only when the CLI runs (click and rich are not
imported by ``import cronwarden``).

Exit statuses and shared options: :mod:`cronwarden.cli.common`. Command groups in their own
modules register at the bottom of this file with ONE line each (see "Registration").
"""

from __future__ import annotations

import json
import sys
import traceback
from datetime import UTC, datetime
from typing import Any, NoReturn

import click

from ..hosting.settings import WEBHOOK_ENV
from ..model.errors import CronwardenError
from ..model.redaction import redact
from .common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    JOBS,
    OPTIONAL_JOBS,
    PROVIDER,
    Fail,
    debug_enabled,
    emit_rows,
    json_output,
    positive_int,
    setup,
    state_info,
    verdict_line,
)
from .crontab import mount as mount_crontab
from .doctor import doctor, drill
from .ledger import ledger
from .migrate import migrate
from .notify import notify
from .pause import register as register_pause
from .plugins import PluginGroup
from .windows import mount as mount_windows


def _setup(jobs_target: str | None, provider_name: str, **kwargs: Any) -> tuple[Any, Any]:
    return setup(jobs_target, provider_name, **kwargs)


def _parse_time(text: str | None, name: str) -> datetime | None:
    if text is None:
        return None
    from ..model.schedule import parse_instant

    try:
        return parse_instant(text)
    except ValueError as exc:
        raise Fail(f"{name}: {exc}") from None


def _job(jobs: Any, name: str) -> Any:
    job = jobs.get(name)
    if job is None:
        known = ", ".join(j.name for j in jobs) or "none"
        raise Fail(f"unknown job {name!r} (known: {known})")
    return job


def _finish(code: int, line: str) -> NoReturn:
    """Print the command's verdict line (as JSON in JSON mode) and exit with ``code``."""
    if json_output():
        click.echo(
            json.dumps({"result": "ok" if code == 0 else "not ok", "exit": code, "message": line})
        )
    else:
        click.echo(line)
    sys.exit(code)


@click.group(cls=PluginGroup)
@click.version_option(package_name="cronwarden")
@click.option("--debug", is_flag=True, help="Show the traceback behind an error line.")
def cli(debug: bool) -> None:
    """Scheduled jobs that run once per window, never overlap and never fail silently.

    Exit status: 0 every run waited for succeeded; 1 a run failed, was dead-lettered or is
    still retrying (check: an alert is active; run --once: also an active alert that
    reached no channel); 2 bad input; 130/143 stopped by SIGINT/SIGTERM.
    """


GRACE = click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds to wait for running handlers after SIGINT/SIGTERM.",
)


def _graceful(runner: Any, grace: float) -> Any:
    from ..hosting.runtime import GracefulStop

    return GracefulStop(runner, grace=grace).install()


@cli.command()
@JOBS
@PROVIDER
@positive_int("--workers", default=2, help="Worker threads.")
@GRACE
@click.option(
    "--once",
    is_flag=True,
    help="Run every job's latest due window, work the queue until it is empty, report, and "
    "exit: 1 when a run did not succeed, or an alert is active that reached no channel.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Serve Prometheus text on METRICS_HOST:PORT/metrics.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics endpoint binds (0.0.0.0 to let a scraper on another host in).",
)
def run(
    jobs_target: str,
    provider: str,
    workers: int,
    grace: float,
    once: bool,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run the jobs of MODULE: scheduler, workers and liveness watcher in one process."""
    from ..hosting.runtime import LocalRunner
    from ..watch.metrics_prometheus import serve_runner_metrics

    jobs, prov = _setup(jobs_target, provider)
    try:
        runner = LocalRunner(jobs, prov, workers=workers)
    except BaseException:
        prov.close()
        raise
    stop = _graceful(runner, grace)  # before anything can be asked to stop
    metrics = (
        None if metrics_port is None else serve_runner_metrics(runner, metrics_port, metrics_host)
    )
    outcomes: dict[str, str] = {}
    try:
        if not once:
            runner.serve()
        else:
            runner.fire_due()
            left: dict[str, set[str]] = {}
            runner.drain(outcomes=outcomes, left=left)
            _report_left(left, jobs_target)
            if stop.signum is None:
                # the channels, routing and hooks of every host: what fires is told now
                report = runner.watcher.check()
                told = runner.watcher.deliveries
                declared = _declared_names(jobs)
                code, line = _with_alerts(*verdict_line(outcomes), report, told, declared)
                _print_status(report, state_info(provider, prov), line=line)
                sys.exit(code)
    finally:
        if metrics is not None:
            metrics.close()
        runner.close()  # pending job pings, then the provider
    sys.exit(stop.finish() or EXIT_OK)


def _with_alerts(
    code: int, line: str, report: Any, deliveries: Any, declared: set[str]
) -> tuple[int, str]:
    """``run --once``'s verdict with the watcher's check of the same invocation. The exit
    status is the runs' (see the group's help); but an active alert that reached no channel
    (none routes it, or its channel keeps failing) has no other way to a person than this
    command's status: then it is 1 and the line names the alerts. So it is for a fired alert
    of a job not in ``declared`` (renamed or removed since) that reached no channel."""
    pending = deliveries.pending()
    stray = _stray(pending, declared)
    if stray:  # a job these jobs do not declare (renamed, removed): its alert reached nobody
        note = f"alert(s) of {', '.join(stray)} (not declared here) reached no channel"
        if code == EXIT_OK:
            code, line = EXIT_FAILED, f"not ok: {note}; runs: {line}"
        else:
            line = f"{line}; {note}"
    if not report.active:
        return code, line
    unreached = {(p.job, p.alert.split(" ")[0]) for p in pending}
    named = sorted(f"{alert.job} {alert.kind.value}" for alert in report.active)
    shown = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
    silent = [a for a in report.active if (a.job, a.kind.value) in unreached]
    if not silent:
        return code, f"{line}; {len(named)} alert(s) active and told ({shown})"
    told = f"{len(named)} alert(s) active ({shown}), {len(silent)} not delivered to any channel"
    if code == EXIT_OK:
        return EXIT_FAILED, f"not ok: {told}; runs: {line}"
    return code, f"{line}; {told}"


@cli.command()
@JOBS
@PROVIDER
@click.argument("job_name")
@click.option("--window", help="Window to run (ISO, UTC); default: the latest due window.")
@click.option(
    "--rerun",
    is_flag=True,
    help="Run a finished window again as a new generation (items its ledger marked done "
    "are not repeated).",
)
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Also work the queue until it is empty (messages of jobs MODULE does not declare are "
    "left for a worker that does).",
)
@GRACE
def trigger(
    jobs_target: str,
    provider: str,
    job_name: str,
    window: str | None,
    rerun: bool,
    wait: bool,
    grace: float,
) -> None:
    """Trigger one window of JOB_NAME by hand, and say what happened to it."""
    from ..hosting.runtime import LocalRunner
    from ..ops.manual import enqueue_by_hand, judge_after

    given = _parse_time(window, "--window")  # bad input is refused before any state is made
    jobs, prov = _setup(jobs_target, provider, job_name=job_name)
    job = _job(jobs, job_name)
    if given is not None:  # a window of the schedule, not in the future
        given = _checked_window(job, given, datetime.now(UTC))
    runner: LocalRunner | None = None
    try:
        runner = LocalRunner(jobs, prov, workers=1)
        when = given or runner.engine.now()
        told = enqueue_by_hand(runner, job, when, rerun=rerun)
        if not told.wait or not wait:
            _finish(told.code, told.line)
        click.echo(told.line) if not json_output() else None
        stop = _graceful(runner, grace)
        outcomes: dict[str, str] = {}
        left: dict[str, set[str]] = {}
        reasons: dict[str, str] = {}
        runner.drain(outcomes=outcomes, left=left, reasons=reasons)
        _report_left(left, jobs_target)
        if stop.signum is not None:
            sys.exit(stop.finish() or EXIT_FAILED)
        code, line = judge_after(runner.store, job, told, outcomes, runner.engine.now())
        if outcomes.get(told.run_key) == "skipped":  # asked for by hand, and it did not run
            why = reasons.get(told.run_key, "skipped")
            code, line = EXIT_FAILED, f"not ok: {told.run_key} did not run: {why}"
        if not json_output():
            click.echo(line)
            _print_history(runner.store, job, limit=3, long=False)
            sys.exit(code)
        _print_history(runner.store, job, limit=3, long=False)
        _finish(code, line)
    finally:
        # pending job pings, then the provider
        runner.close() if runner is not None else prov.close()


@cli.command()
@JOBS
@PROVIDER
def status(jobs_target: str, provider: str) -> None:
    """Jobs, schedules, last success, next expected run, state, failures, DLQ depth."""
    from ..model.ports import STATUS
    from ..watch.watcher import Report, Watcher

    jobs, prov = _setup(jobs_target, provider, read_only=True)
    try:
        store, queue = prov.store(), prov.queue()
        watcher = Watcher(jobs, store, queue, notifiers=[])
        statuses = store.query(STATUS)
        health, _ = watcher.evaluate(statuses, watcher.clock(), None)
        _print_status(Report(health, queue.dlq_depth(), [], [], []), state_info(provider, prov))
        _print_undelivered(statuses, watcher)
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
    import dataclasses

    from ..hosting import Composition
    from ..hosting.settings import HostSettings

    jobs, prov = _setup(jobs_target, provider, read_only=True)
    # the same notifiers (alerting settings file, webhook, dead-man's switch) as every host
    host = dataclasses.replace(HostSettings.from_env(), webhook_url=webhook or "")
    try:
        watcher = Composition(jobs, provider=prov, host=host).watcher
        report = watcher.check()
    finally:
        prov.close()
    for alert in report.active:
        click.echo(f"ALERT {alert.kind.value}: {alert.text}")
    for text in watcher.deliveries.lines():  # alerts that have not reached a channel yet
        click.echo(text)
    pending = watcher.deliveries.pending()
    unreached = _unreached(pending)
    stray = _stray(pending, _declared_names(jobs))
    if stray:
        click.echo(
            f"note: {', '.join(stray)}: alert(s) on record for job(s) {jobs_target} does not "
            "declare (renamed or removed?) reached no channel",
            err=True,
        )
    if not report.ok or any(p.failing for p in pending) or unreached:
        sys.exit(EXIT_FAILED)
    click.echo(f"ok: {len(report.jobs)} job(s) healthy")


def _declared_names(jobs: Any) -> set[str]:
    """The names of ``jobs``'s jobs and event consumers."""
    return {job.name for job in jobs} | set(jobs.consumers)


def _stray(pending: Any, declared: set[str]) -> list[str]:
    """The jobs not in ``declared`` with a fired alert among ``pending`` that reached no
    channel (the watcher judges declared jobs only: nothing else would say so); cronwarden's
    own (``_watcher``: queue-wide alerts, judged by every check) are not among them."""
    unreached = _unreached(pending)
    return sorted({p.job for p in unreached if p.job not in declared and not p.job.startswith("_")})


def _unreached(pending: Any) -> list[Any]:
    """The fired alerts among ``pending`` deliveries that reached no channel: none takes
    them, or theirs keeps failing. Their only way to a person is a command's exit status."""
    from ..watch.outbox import UNROUTED

    return [
        p for p in pending if p.alert.endswith(" fired") and (p.channel == UNROUTED or p.failing)
    ]


@cli.command()
@JOBS
@PROVIDER
@click.argument("job_name")
@positive_int("--limit", default=20, help="At most this many runs.")
@click.option("--long", "long_", is_flag=True, help="Show errors in full.")
def history(jobs_target: str, provider: str, job_name: str, limit: int, long_: bool) -> None:
    """The latest runs of JOB_NAME, newest first."""
    jobs, prov = _setup(jobs_target, provider, read_only=True, job_name=job_name)
    try:
        _print_history(prov.store(), _job(jobs, job_name), limit=limit, long=long_)
    finally:
        prov.close()


@cli.group()
def dlq() -> None:
    """Inspect and redrive the dead-letter queue."""


#: dead letters read to filter them by job (``--jobs``): the rest are not listed
_FILTER_PEEK = 1000


def _declares(jobs: Any, letter: Any) -> bool:
    """Whether ``jobs`` declare the job or event consumer ``letter`` is for (a letter that
    names none is nobody's)."""
    attributes = letter.attributes
    named = attributes.get("consumer") or attributes.get("job")
    return named is not None and jobs.undeclared(attributes) is None


def _letters_of(jobs: Any, letters: list[Any]) -> list[Any]:
    if jobs is None:
        return letters
    return [letter for letter in letters if _declares(jobs, letter)]


@dlq.command("list")
@OPTIONAL_JOBS
@PROVIDER
@positive_int("--limit", default=20, help="At most this many messages.")
def dlq_list(jobs_target: str | None, provider: str, limit: int) -> None:
    """Dead letters with their reasons (not consumed)."""
    from .views import letter_row

    jobs, prov = _setup(jobs_target, provider, read_only=True)
    try:
        queue = prov.queue()
        depth = queue.dlq_depth()
        if jobs is None:
            letters, title = queue.dlq_peek(limit), f"dead-letter queue: {depth} message(s)"
        else:  # filtered before the limit: --limit counts the letters of these jobs
            letters = _letters_of(jobs, queue.dlq_peek(max(limit, _FILTER_PEEK)))[:limit]
            title = f"dead-letter queue: {depth} message(s); of jobs in {jobs_target}: " + (
                f"{len(letters)} shown"
                if depth <= _FILTER_PEEK
                else f"{len(letters)} shown among the oldest {_FILTER_PEEK}"
            )
    finally:
        prov.close()
    emit_rows(
        title,
        ("message id", "run key", "dead-lettered", "reason", "attempts", "description"),
        (letter_row(letter) for letter in letters),
        cells=lambda r: [
            r["message_id"],
            r["run_key"],
            r["dead_lettered_at"] or "-",
            r["reason"],
            str(r["attempts"]),
            r["description"][:200],
        ],
    )


@dlq.command("show")
@OPTIONAL_JOBS
@PROVIDER
@click.argument("message_id")
def dlq_show(jobs_target: str | None, provider: str, message_id: str) -> None:
    """One dead letter in full: body, attributes, reason, when, and its run's last error."""
    from .common import NoState
    from .views import letter_detail

    try:
        jobs, prov = _setup(jobs_target, provider, read_only=True)
    except NoState as exc:
        raise Fail(f"no dead letter with message id {message_id!r}: {exc.message}") from None
    try:
        letters = _letters_of(jobs, prov.queue().dlq_peek(1000))
        for letter in letters:
            if letter.message_id == message_id:
                detail = letter_detail(letter, prov.store())
                click.echo(json.dumps(detail, indent=2, ensure_ascii=False, default=str))
                return
    finally:
        prov.close()
    raise Fail(f"no dead letter with message id {message_id!r}")


@dlq.command("redrive")
@OPTIONAL_JOBS
@PROVIDER
@positive_int("--limit", default=10, help="At most this many messages.")
def dlq_redrive(jobs_target: str | None, provider: str, limit: int) -> None:
    """Move dead letters back to the queue, in a capped batch. Fix the cause first.

    The oldest ``--limit`` letters move, whatever their job: with --jobs, it refuses (exit 2)
    when any of them is of a job the module does not declare (redrive by window instead)."""
    jobs, prov = _setup(jobs_target, provider, read_only=True)
    try:
        queue = prov.queue()
        if jobs is not None:
            others = sorted(
                {
                    letter.attributes.get("consumer") or letter.attributes.get("job") or "?"
                    for letter in queue.dlq_peek(limit)
                    if not _declares(jobs, letter)
                }
            )
            if others:
                raise Fail(
                    f"the oldest {limit} dead letter(s) include jobs {jobs_target} does not "
                    f"declare ({', '.join(others)}): a redrive moves the oldest of any job; "
                    "leave --jobs out to move them all, or `dlq redrive --job J --window W`"
                )
        moved = queue.redrive(limit)
    finally:
        prov.close()
    click.echo(f"redrove {moved} message(s)")


mount_windows(dlq)  # dlq windows / resolve / by window


@cli.command()
@JOBS
@PROVIDER
@click.argument("job_name")
@click.option("--from", "start", required=True, help="First window (ISO, UTC).")
@click.option("--to", "end", help="Last window (ISO, UTC); default: now.")
@positive_int("--limit", default=100, help="At most this many windows.")
@click.option(
    "--wait/--no-wait",
    default=False,
    help="Also work the queue until empty (messages of jobs MODULE does not declare are left "
    "for a worker that does).",
)
@GRACE
def backfill(
    jobs_target: str,
    provider: str,
    job_name: str,
    start: str,
    end: str | None,
    limit: int,
    wait: bool,
    grace: float,
) -> None:
    """Enqueue windows of JOB_NAME that never ran, oldest first."""
    from ..hosting.runtime import LocalRunner
    from ..model.runs import RunRequest
    from ..run.backfill import missing_windows

    first, given_last = _parse_time(start, "--from"), _parse_time(end, "--to")
    _backfill_range(first, given_last, datetime.now(UTC))
    jobs, prov = _setup(jobs_target, provider, job_name=job_name)
    job = _job(jobs, job_name)
    runner: LocalRunner | None = None
    try:
        runner = LocalRunner(jobs, prov, workers=1)
        last = given_last or runner.engine.now()
        assert first is not None
        missing = missing_windows(runner.store, job, first, last)
        windows = missing[:limit]
        runner.trigger.publish_oldest_first(  # any number of workers run them oldest first
            [RunRequest(job.name, window, reason="backfill") for window in windows]
        )
        remaining = len(missing) - len(windows)
        more = (
            f"; {remaining} more missing window(s) left (run again or raise --limit)"
            if remaining
            else ""
        )
        click.echo(f"enqueued {len(windows)} window(s){more}")
        if not wait:
            return
        stop = _graceful(runner, grace)
        outcomes: dict[str, str] = {}
        left: dict[str, set[str]] = {}
        runner.drain(outcomes=outcomes, left=left)
        _report_left(left, jobs_target)
        if stop.signum is not None:
            sys.exit(stop.finish() or EXIT_FAILED)
        code, line = verdict_line(outcomes)
        click.echo(line)
        sys.exit(code)
    finally:
        runner.close() if runner is not None else prov.close()


def _backfill_range(first: datetime | None, last: datetime | None, now: datetime) -> None:
    """Refuse a backfill range reaching into the future (a window run before its time would
    read as done, and the real run of it would be skipped as a duplicate) or before the
    year 1000 (no run key can hold it)."""
    for name, when in (("--from", first), ("--to", last)):
        if when is None:
            continue
        if when > now:
            raise Fail(
                f"{name} {when:%Y-%m-%dT%H:%MZ} is in the future: a window is backfilled once "
                f"its time has come (now is {now:%Y-%m-%dT%H:%MZ}); leave --to out to mean now"
            )
        if when.year < 1000:
            raise Fail(f"{name} {when.isoformat()} is out of range (before the year 1000)")


def _report_left(left: dict[str, set[str]], jobs_target: str) -> None:
    """One line (stderr) naming the queued messages left for jobs ``jobs_target`` does not
    declare: another module's, run by a worker that declares them, never dead-lettered here."""
    if not left:
        return
    named = ", ".join(f"{name} ({len(ids)})" for name, ids in sorted(left.items()))
    click.echo(
        f"note: left {sum(len(ids) for ids in left.values())} queued message(s) of jobs "
        f"{jobs_target} does not declare: {named}; a worker with their module runs them",
        err=True,
    )


def _checked_window(job: Any, when: datetime, now: datetime) -> datetime:
    from ..hosting.trigger import WindowRefused, check_window

    try:
        return check_window(job, when, now)
    except WindowRefused as exc:
        raise Fail(str(exc)) from None


def _print_undelivered(statuses: Any, watcher: Any) -> None:
    """One ``UNDELIVERED`` line per job whose alerts have not reached every channel."""
    from ..watch.deliverer import DeliveryState
    from ..watch.outbox import entries_of

    state = DeliveryState(now=watcher.clock(), policy=watcher.delivery)
    state.outbox = {r.key.job: entries_of(r.data) for r in statuses if entries_of(r.data)}
    for text in state.lines():  # JSON lines stay one row per job: the lines go to stderr
        click.echo(text, err=json_output())


def _print_status(report: Any, where: Any, *, line: str | None = None) -> None:
    from .views import status_row

    if line is not None:
        if json_output():
            click.echo(json.dumps({"result": line.split(":")[0], "message": line}))
        else:
            click.echo(line)
    rows = [status_row(item) for item in report.jobs]
    if not json_output():
        click.echo(f"state: {where.where} (provider {where.provider})")
    emit_rows(
        "cronwarden jobs",
        (
            "job",
            "owner",
            "schedule",
            "last success",
            "next expected",
            "state",
            "failures",
            "duration (p50 / p95)",
            "missed after",
            "alerts",
        ),
        rows,
        cells=lambda r: [
            r["job"],
            r["owner"] or "-",
            r["schedule"],
            r["last_success_window"] or "never",
            r["next_expected"] or "-",
            r["state"] + (" (overran)" if r["overran"] else ""),
            str(r["failures"]),
            r["duration"],
            r["missed_after"],
            ", ".join(r["alerts"]) or "ok",
        ],
        footer=None if report.dlq_depth is None else f"dead-letter queue depth: {report.dlq_depth}",
    )


def _print_history(store: Any, job: Any, *, limit: int, long: bool) -> None:
    from .views import history_rows

    rows = history_rows(store, job, limit)
    emit_rows(
        f"history of {job.name}",
        (
            "window",
            "state",
            "att.",
            "started",
            "finished",
            "ms",
            "reason",
            "counters",
            "worker",
            "error",
        ),
        rows,
        cells=lambda r: [
            r["window"],
            r["state"] + (" (overran)" if r["overran"] else ""),
            str(r["attempt"]) + (f" g{r['generation']}" if r["generation"] else ""),
            r["started_at"] or "-",
            r["finished_at"] or "-",
            "" if r["duration_ms"] is None else str(r["duration_ms"]),
            r["reason"],
            " ".join(f"{k}={v}" for k, v in sorted(r["counters"].items())),
            r["worker"],
            r["error"] if long or len(r["error"]) <= 80 else r["error"][:79] + "… (--long)",
        ],
    )


# -- Registration: one line per command module ------------------------------------------------
# A command group in its own module (``core/cli/<area>.py``, importing its options from
# ``cli/common.py``) is attached here with ONE line, e.g.
#     cli.add_command(ledger)            # from .ledger import ledger
#     dlq.add_command(dlq_resolve)       # from .windows import dlq_resolve
cli.add_command(notify)
mount_crontab(cli)
cli.add_command(doctor)
cli.add_command(drill)
register_pause(cli)
cli.add_command(ledger)
cli.add_command(migrate)
# ``dashboard``, ``deploy`` and ``emulators`` come from other packages: :mod:`.plugins`.


#: top-level modules of the optional extras, for a one-line install hint
_EXTRAS = {"google": "gcp", "azure": "azure", "psycopg": "postgres", "proton": "emulators"}


def _error_line(exc: BaseException) -> str:
    """One line for an exception a user can cause."""
    import sqlite3

    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    if isinstance(exc, sqlite3.DatabaseError):
        from .common import state_path

        return f"state {state_path()}: {exc}"
    if isinstance(exc, ImportError):
        extra = _EXTRAS.get((exc.name or "").split(".")[0])
        if extra:
            return f"{exc} (a missing extra: pip install 'cronwarden[{extra}]')"
    if isinstance(exc, CronwardenError | ValueError | OSError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point: clear one-line errors and the exit statuses of :mod:`cli_common`."""
    import sqlite3

    try:
        cli.main(args=argv, prog_name="cronwarden", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if debug_enabled() and exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__)
        click.echo(f"error: {redact(exc.format_message())}", err=True)  # one line, no usage
        sys.exit(EXIT_BAD_INPUT if type(exc) is click.ClickException else exc.exit_code)
    except (CronwardenError, ValueError, KeyError, OSError, sqlite3.Error, ImportError) as exc:
        if debug_enabled():
            traceback.print_exc()
        click.echo(f"error: {redact(_error_line(exc))}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # a bug: still one line, with the way to see more
        if debug_enabled():
            traceback.print_exc()
        hint = "" if debug_enabled() else " (cronwarden --debug … shows the traceback)"
        click.echo(f"error: {redact(_error_line(exc))}{hint}", err=True)
        sys.exit(EXIT_FAILED)
    sys.exit(EXIT_OK)
