"""Alerting settings from TOML or the environment, secrets by reference, routing by owner/tag."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cronwarden import Alert, Condition, ConfigurationError
from cronwarden.watch.alerting.channels import Email, PagerDuty, SignedWebhook, SlackWebhook, Teams
from cronwarden.watch.alerting.settings import load_settings
from cronwarden.watch.alerting.watchdog import PingFormat

from .conftest import HttpSink, write


def alert(
    job: str, owner: str | None, tags: list[str], kind: Condition = Condition.FAILING
) -> Alert:
    return Alert(job, kind, True, f"{job} failing", extra={"owner": owner, "tags": tags})


FULL = """
[alerting.channels.team-data-chat]
type = "slack"
url = "env:DATA_SLACK_URL"
owners = ["team-data"]

[alerting.channels.billing-pager]
type = "pagerduty"
routing_key = "env:PD_KEY"
url = "{base}/v2/enqueue"
tags = ["billing"]

[alerting.channels.everything]
type = "webhook"
url = "{base}/all"
secret = "file:{secret_file}"

[alerting.channels.teams]
type = "teams"
url = "{base}/teams"
card = "messagecard"
owners = ["team-web"]

[alerting.channels.mail]
type = "email"
host = "127.0.0.1"
port = 2525
tls = "none"
from = "cronwarden@example.test"
to = ["oncall@example.test"]
username = "cw"
password = "env:SMTP_PASSWORD"
owners = ["team-web"]

[alerting.heartbeat]
url = "env:HC_URL"
format = "cronitor"

[alerting.job_pings]
url = "{base}/ping/key/{{job}}"
jobs = ["billing-sync"]
"""


@pytest.fixture
def env(tmp_path: Path, http_sink: HttpSink) -> dict[str, str]:
    return {
        "DATA_SLACK_URL": http_sink.base + "/hooks/data",
        "PD_KEY": "pd-routing-key-0001",
        "SMTP_PASSWORD": "smtp-password-42",
        "HC_URL": http_sink.base + "/p/cronitor-key/watcher",
    }


def test_full_settings_build_every_channel(
    tmp_path: Path, http_sink: HttpSink, env: dict[str, str]
) -> None:
    secret = write(tmp_path, "hmac.secret", "hmac-secret-from-file\n")
    config = write(tmp_path, "alerting.toml", FULL.format(base=http_sink.base, secret_file=secret))
    settings = load_settings(config, env=env)
    kinds = {c.name: type(c) for c in settings.channels}
    assert kinds == {
        "team-data-chat": SlackWebhook,
        "billing-pager": PagerDuty,
        "everything": SignedWebhook,
        "teams": Teams,
        "mail": Email,
    }
    hooked = next(c for c in settings.channels if isinstance(c, SignedWebhook))
    assert hooked.secret == "hmac-secret-from-file"
    assert settings.heartbeat is not None and settings.heartbeat.format is PingFormat.CRONITOR
    assert settings.job_pings is not None and settings.job_pings.url_for("other") is None
    assert settings.job_pings.url_for("billing-sync") == http_sink.base + "/ping/key/billing-sync"
    assert settings.source == str(config)
    assert len(settings.watcher_hooks()) == 2  # store heartbeat + the dead-man's switch


def test_routing_by_owner_and_tag(tmp_path: Path, http_sink: HttpSink, env: dict[str, str]) -> None:
    secret = write(tmp_path, "hmac.secret", "hmac-secret-from-file")
    config = write(tmp_path, "alerting.toml", FULL.format(base=http_sink.base, secret_file=secret))
    router = load_settings(config, env=env).router()

    def names(a: Alert) -> set[str]:
        return {c.name for c in router.channels_for(a)}

    assert names(alert("etl", "team-data", [])) == {"team-data-chat", "everything"}
    assert names(alert("billing-sync", "team-ops", ["billing"])) == {"billing-pager", "everything"}
    assert names(alert("site", "team-web", [])) == {"teams", "mail", "everything"}
    assert names(alert("_watcher", None, [], Condition.DEAD_LETTERS)) == {"everything"}
    assert router.channels[0].name == "log"


def test_an_alert_no_route_matches_is_logged_as_an_error(
    http_sink: HttpSink, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    text = f"""
[channels.web]
type = "slack"
url = "{http_sink.base}/web"
owners = ["team-web"]
"""
    router = load_settings(env={"CRONWARDEN_ALERTING_TOML": text}).router()
    router.notify(alert("etl", "team-data", ["etl"]))
    events = [line["event"] for line in log_lines()]
    assert "alert.fired" in events and "alert.unrouted" in events
    assert http_sink.received == []
    router.notify(alert("site", "team-web", []))
    assert [r.path for r in http_sink.received] == ["/web"]


def test_environment_alone_configures_webhook_and_heartbeat() -> None:
    settings = load_settings(
        env={
            "CRONWARDEN_WEBHOOK_URL": "https://hooks.example.test/T/B/legacy-secret",
            "CRONWARDEN_HEARTBEAT_URL": "https://hc-ping.example.test/ping/1234-uuid",
            "CRONWARDEN_HEARTBEAT_FORMAT": "sentry",
        }
    )
    assert [(c.name, c.type) for c in settings.channels] == [("webhook", "slack")]
    assert settings.heartbeat is not None and settings.heartbeat.format is PingFormat.SENTRY
    assert settings.source == "environment"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            '[channels.p]\ntype = "pagerduty"\nrouting_key = "inline-key-123"',
            "channels.p.routing_key is given inline: give the secret by reference",
        ),
        (
            '[channels.p]\ntype = "pagerduty"\nrouting_key = "env:NOPE"',
            "channels.p.routing_key (env:NOPE): the environment variable is not set",
        ),
        (
            '[channels.w]\ntype = "webhook"\nurl = "https://x.test"\n'
            'secret = "file:/nonexistent/s"',
            "channels.w.secret (file:/nonexistent/s): cannot read it",
        ),
        (
            '[channels.s]\ntype = "slack"\nurl = "https://x.test"\nowner = ["t"]',
            "channels.s: unknown setting(s) owner",
        ),
        (
            '[channels.s]\ntype = "sms"',
            "channels.s.type: one of email, pagerduty, slack, teams, webhook",
        ),
        (
            '[channels.s]\ntype = "slack"\nurl = "https://x.test"\ntags = "billing"',
            "channels.s.tags: expected a list of strings",
        ),
        (
            '[channels.m]\ntype = "email"\nhost = "h"\nfrom = "a@b"\nto = []',
            "channels.m.to: at least one recipient",
        ),
        (
            '[heartbeat]\nurl = "https://x.test"\nformat = "nagios"',
            "heartbeat.format: 'nagios' is not one of",
        ),
        ("[channels\n", "not valid TOML"),
        ('colour = "blue"', "unknown setting(s) colour"),
    ],
)
def test_bad_settings_fail_with_one_line_naming_the_setting(toml: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(env={"CRONWARDEN_ALERTING_TOML": toml})
    assert message in str(caught.value)
    assert "inline-key-123" not in str(caught.value)


def test_missing_settings_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"alerting settings .*nope\.toml"):
        load_settings(tmp_path / "nope.toml", env={})


def test_resolved_secrets_never_reach_the_logs(
    http_sink: HttpSink, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    http_sink.status["/v2/enqueue"] = 400
    text = f"""
[channels.pager]
type = "pagerduty"
routing_key = "env:PD_KEY"
url = "{http_sink.base}/v2/enqueue"
"""
    settings = load_settings(
        env={"CRONWARDEN_ALERTING_TOML": text, "PD_KEY": "pd-secret-routing-key-77"}
    )
    settings.router().notify(
        Alert("etl", Condition.FAILING, True, "etl failing with key pd-secret-routing-key-77")
    )
    dumped = json.dumps(log_lines())
    assert "alert.delivery_failed" in dumped
    assert "pd-secret-routing-key-77" not in dumped and "***" in dumped
