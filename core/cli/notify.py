"""``cronwarden notify``: checks that alerts reach a human. Mounted by :mod:`cronwarden.cli`."""

from __future__ import annotations

import socket
import sys
from datetime import UTC, datetime

import click

TEST_JOB = "cronwarden-notify-test"


def heartbeat_log_url(url: str, fmt: str) -> str | None:
    """Where ``notify test`` may write to a dead-man's switch without recording a check:
    Healthchecks.io's ``<ping URL>/log`` (an event in the check's log, status unchanged).
    None for formats without one (Cronitor and Sentry Crons record every ping as a check)."""
    import urllib.parse

    if fmt != "healthchecks":
        return None
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/log"))


@click.group()
def notify() -> None:
    """Alert channels: send a test alert through each one."""


@notify.command("test")
@click.option(
    "--config",
    "config",
    envvar="CRONWARDEN_ALERTING_CONFIG",
    type=click.Path(dir_okay=False),
    help="Alerting settings (TOML); default $CRONWARDEN_ALERTING_CONFIG or the environment.",
)
@click.option("--channel", "only", multiple=True, help="Test only this channel (repeatable).")
def notify_test(config: str | None, only: tuple[str, ...]) -> None:
    """Send a test alert through every configured channel, and a log entry to the dead-man's
    switch (Healthchecks ``/log``: an event that records no check, so a test never marks the
    watcher healthy; Cronitor and Sentry have no such endpoint and are skipped, said so).
    PagerDuty gets an ``info`` event resolved at once.

    Exit 1 naming each channel that failed, or when no channel besides the log is configured.
    """
    from ..model.logs import configure
    from ..model.redaction import redact
    from ..watch.alerting.channels import Channel
    from ..watch.alerting.http import DeliveryError, send
    from ..watch.alerting.settings import load_settings
    from ..watch.watcher import Alert, Condition

    configure()
    settings = load_settings(config)
    channels: list[Channel] = settings.channels
    if only:
        unknown = sorted(set(only) - {c.name for c in channels})
        if unknown:
            known = ", ".join(c.name for c in channels) or "none"
            raise click.UsageError(f"unknown channel(s) {', '.join(unknown)} (known: {known})")
        channels = [c for c in channels if c.name in only]
    if not channels and settings.heartbeat is None:
        click.echo(
            f"error: no alert channel configured ({settings.source}); only the log would "
            "see an alert, nothing would reach a human",
            err=True,
        )
        sys.exit(1)
    now = datetime.now(UTC)
    host = socket.gethostname()
    failed: list[str] = []
    for channel in channels:
        alert = Alert(
            TEST_JOB,
            Condition.FAILING,
            True,
            f"cronwarden test alert from {host} at {now:%Y-%m-%d %H:%M:%S} UTC through the "
            f"{channel.name} channel ({channel.type}). No job is failing: if you read this, "
            "alerts reach you.",
            first_check="nothing: this is a test",
            extra={"test": True, "channel": channel.name},
        )
        try:
            channel.deliver_test(alert)
        except DeliveryError as exc:
            failed.append(channel.name)
            click.echo(f"FAILED  {channel.describe()}: {exc}")
        except Exception as exc:  # a channel bug must still name the channel
            failed.append(channel.name)
            click.echo(f"FAILED  {channel.describe()}: {redact(f'{type(exc).__name__}: {exc}')}")
        else:
            click.echo(f"ok      {channel.describe()}")
    tested = len(channels)
    if settings.heartbeat is not None and not only:
        name = f"heartbeat ({settings.heartbeat.format.value})"
        target = heartbeat_log_url(settings.heartbeat.url, settings.heartbeat.format.value)
        if target is None:
            click.echo(
                f"SKIPPED {name}: {settings.heartbeat.format.value} has no test endpoint and "
                "any ping would record a watcher check; its URL is tested by the next check"
            )
        else:
            tested += 1
            try:
                send(
                    target,
                    f"cronwarden notify test from {host}: not a check".encode(),
                    headers={"Content-Type": "text/plain"},
                    timeout=settings.heartbeat.timeout,
                )
            except DeliveryError as exc:
                failed.append("heartbeat")
                click.echo(f"FAILED  {name}: {exc}")
            else:
                click.echo(f"ok      {name}: logged to its event log, no check recorded")
    if not tested:
        click.echo("error: nothing could be tested: no alert channel configured", err=True)
        sys.exit(1)
    if failed:
        click.echo(f"error: {len(failed)} channel(s) failed: {', '.join(failed)}", err=True)
        sys.exit(1)
