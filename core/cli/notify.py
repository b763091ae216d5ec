"""``cronwarden notify``: checks that alerts reach a human. Mounted by :mod:`cronwarden.cli`."""

from __future__ import annotations

import socket
import sys
from datetime import UTC, datetime

import click

TEST_JOB = "cronwarden-notify-test"


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
    """Send a test alert through every configured channel (and ping the dead-man's switch).

    Exit 1 naming each channel that failed, or when no channel besides the log is configured.
    """
    from ..model.logs import configure
    from ..model.redaction import redact
    from ..watch.alerting.channels import Channel
    from ..watch.alerting.http import DeliveryError
    from ..watch.alerting.settings import load_settings
    from ..watch.alerting.watchdog import PingState
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
    if settings.heartbeat is not None and not only:
        name = f"heartbeat ({settings.heartbeat.format.value})"
        try:
            settings.heartbeat.ping(PingState.SUCCESS, f"cronwarden notify test from {host}")
        except DeliveryError as exc:
            failed.append("heartbeat")
            click.echo(f"FAILED  {name}: {exc}")
        else:
            click.echo(f"ok      {name}")
    if failed:
        click.echo(f"error: {len(failed)} channel(s) failed: {', '.join(failed)}", err=True)
        sys.exit(1)
