"""Alerting settings from one TOML file or the environment.

Where they come from, first match wins: the ``path`` argument, ``$CRONWARDEN_ALERTING_CONFIG``
(a file path), ``$CRONWARDEN_ALERTING_TOML`` (the TOML text itself, for platforms that only set
environment values). Then two plain variables add to it: ``$CRONWARDEN_WEBHOOK_URL`` (a Slack-style
channel named ``webhook``, as before) and ``$CRONWARDEN_HEARTBEAT_URL`` /
``$CRONWARDEN_HEARTBEAT_FORMAT`` (the dead-man's switch). The file may put everything under an
``[alerting]`` table (to share a file with other settings) or at the top level::

    [channels.data-pager]
    type = "pagerduty"
    routing_key = "env:PD_ROUTING_KEY"
    owners = ["team-data"]

    [heartbeat]
    url = "env:HC_PING_URL"
    format = "healthchecks"

Secrets are references (``env:NAME``, ``file:/path``), resolved when the settings load (a
missing one fails at once, naming the setting), registered for redaction, and never logged.
Unknown keys are refused: a typo must not turn a channel off silently.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...model.environment import WEBHOOK_ENV as HOST_WEBHOOK_ENV
from ...model.errors import ConfigurationError
from .channels import Channel, Email, PagerDuty, SignedWebhook, SlackWebhook, Teams
from .routing import Route, Router
from .secrets import resolve_secret
from .watchdog import (
    HEARTBEAT_FORMAT_ENV,
    HEARTBEAT_URL_ENV,
    CheckHook,
    DeadMansSwitch,
    JobPings,
    StoreHeartbeat,
    ping_format,
)

WEBHOOK_ENV = HOST_WEBHOOK_ENV  #: one name, defined once in cronwarden.model.environment
CONFIG_ENV = "CRONWARDEN_ALERTING_CONFIG"
TOML_ENV = "CRONWARDEN_ALERTING_TOML"
_COMMON = {"type", "owners", "tags", "timeout"}
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass
class AlertingSettings:
    """Built channels (with their routes), the dead-man's switch and per-job pings."""

    routes: list[Route] = field(default_factory=list)
    heartbeat: DeadMansSwitch | None = None
    job_pings: JobPings | None = None
    source: str = "defaults"

    @property
    def channels(self) -> list[Channel]:
        return [route.channel for route in self.routes]

    def router(self) -> Router:
        """The watcher's notifier: the log line plus every routed channel."""
        return Router(self.routes)

    def watcher_hooks(self) -> list[CheckHook]:
        """The store heartbeat, plus the dead-man's switch when one is configured."""
        hooks: list[CheckHook] = [StoreHeartbeat()]
        if self.heartbeat is not None:
            hooks.append(self.heartbeat)
        return hooks


def load_settings(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> AlertingSettings:
    """Read, validate and build the alerting settings (see the module doc). Raises
    :class:`~cronwarden.model.errors.ConfigurationError` with one line naming the bad setting."""
    environ = os.environ if env is None else env
    document: dict[str, Any] = {}
    source = "environment"
    chosen = path or environ.get(CONFIG_ENV)
    if chosen:
        file = Path(chosen).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"alerting settings {file}: {exc.strerror}") from None
        document, source = _parse(text, str(file)), str(file)
    elif environ.get(TOML_ENV):
        document = _parse(environ[TOML_ENV], f"${TOML_ENV}")
        source = f"${TOML_ENV}"
    section = document.get("alerting", document)
    if not isinstance(section, dict):
        raise ConfigurationError(f"{source}: [alerting] must be a table")
    _only(section, {"channels", "heartbeat", "job_pings"}, source)
    settings = AlertingSettings(source=source)
    channels = section.get("channels", {})
    if not isinstance(channels, dict):
        raise ConfigurationError(f"{source}: channels must be tables: [channels.NAME]")
    for name, spec in channels.items():
        settings.routes.append(_route(name, spec, environ))
    legacy = environ.get(WEBHOOK_ENV, "").strip()
    if legacy and "webhook" not in channels:
        settings.routes.append(Route.of(SlackWebhook("webhook", legacy)))
    settings.heartbeat = _heartbeat(section.get("heartbeat"), environ)
    settings.job_pings = _job_pings(section.get("job_pings"), environ)
    return settings


def _parse(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"alerting settings {where}: not valid TOML: {exc}") from None


def _only(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(allowed))}"
        )


def _text(spec: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = spec.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{where}.{key}: required text")
    return value


def _strings(spec: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = spec.get(key, [])
    if isinstance(value, str) or not isinstance(value, list):
        raise ConfigurationError(f"{where}.{key}: expected a list of strings")
    if not all(isinstance(item, str) and item for item in value):
        raise ConfigurationError(f"{where}.{key}: expected a list of strings")
    return list(value)


def _timeout(spec: Mapping[str, Any], where: str) -> float:
    value = spec.get("timeout", 10)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 120:
        raise ConfigurationError(f"{where}.timeout: seconds between 0 and 120")
    return float(value)


_Builder = Callable[[str, Mapping[str, Any], str, Mapping[str, str], float], Channel]


def _slack(
    name: str, spec: Mapping[str, Any], where: str, env: Mapping[str, str], t: float
) -> Channel:
    url = resolve_secret(spec.get("url"), f"{where}.url", inline_ok=True, env=env)
    return SlackWebhook(name, url, timeout=t)


def _webhook(
    name: str, spec: Mapping[str, Any], where: str, env: Mapping[str, str], t: float
) -> Channel:
    url = resolve_secret(spec.get("url"), f"{where}.url", inline_ok=True, env=env)
    secret = resolve_secret(spec.get("secret"), f"{where}.secret", env=env)
    return SignedWebhook(name, url, secret, timeout=t)


def _pagerduty(
    name: str, spec: Mapping[str, Any], where: str, env: Mapping[str, str], t: float
) -> Channel:
    key = resolve_secret(spec.get("routing_key"), f"{where}.routing_key", env=env)
    url = _text(spec, "url", where, "https://events.pagerduty.com/v2/enqueue")
    return PagerDuty(
        name, key, url=url, source=_text(spec, "source", where, "cronwarden"), timeout=t
    )


def _teams(
    name: str, spec: Mapping[str, Any], where: str, env: Mapping[str, str], t: float
) -> Channel:
    url = resolve_secret(spec.get("url"), f"{where}.url", inline_ok=True, env=env)
    card = _text(spec, "card", where, "adaptive")
    if card not in Teams.CARDS:
        raise ConfigurationError(f"{where}.card: one of {', '.join(Teams.CARDS)}")
    return Teams(name, url, card=card, timeout=t)


def _email(
    name: str, spec: Mapping[str, Any], where: str, env: Mapping[str, str], t: float
) -> Channel:
    tls = _text(spec, "tls", where, "starttls")
    if tls not in Email.TLS:
        raise ConfigurationError(f"{where}.tls: one of {', '.join(Email.TLS)}")
    port = spec.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise ConfigurationError(f"{where}.port: an integer")
    recipients = _strings(spec, "to", where)
    if not recipients:
        raise ConfigurationError(f"{where}.to: at least one recipient")
    username = spec.get("username")
    if username is not None and not isinstance(username, str):
        raise ConfigurationError(f"{where}.username: text")
    password = (
        resolve_secret(spec["password"], f"{where}.password", env=env)
        if "password" in spec
        else None
    )
    return Email(
        name,
        host=_text(spec, "host", where),
        port=port,
        tls=tls,
        sender=_text(spec, "from", where),
        recipients=recipients,
        username=username,
        password=password,
        subject_prefix=str(spec.get("subject_prefix", "[cronwarden]")),
        ca_file=_text(spec, "ca_file", where) if "ca_file" in spec else None,
        timeout=t,
    )


_BUILDERS: dict[str, tuple[set[str], _Builder]] = {
    "slack": ({"url"}, _slack),
    "webhook": ({"url", "secret"}, _webhook),
    "pagerduty": ({"routing_key", "url", "source"}, _pagerduty),
    "teams": ({"url", "card"}, _teams),
    "email": (
        {"host", "port", "tls", "from", "to", "username", "password", "subject_prefix", "ca_file"},
        _email,
    ),
}


def _route(name: str, spec: Any, env: Mapping[str, str]) -> Route:
    where = f"channels.{name}"
    if not name or set(name) - _NAME_CHARS:
        raise ConfigurationError(f"{where}: channel names use a-z, 0-9, '-' and '_'")
    if not isinstance(spec, dict):
        raise ConfigurationError(f"{where}: expected a table")
    kind = spec.get("type")
    if kind not in _BUILDERS:
        raise ConfigurationError(f"{where}.type: one of {', '.join(sorted(_BUILDERS))}")
    keys, build = _BUILDERS[kind]
    _only(spec, keys | _COMMON, where)
    channel = build(name, spec, where, env, _timeout(spec, where))
    return Route.of(channel, _strings(spec, "owners", where), _strings(spec, "tags", where))


def _heartbeat(spec: Any, env: Mapping[str, str]) -> DeadMansSwitch | None:
    if spec is None:
        return DeadMansSwitch.from_env(env)
    if not isinstance(spec, dict):
        raise ConfigurationError("heartbeat: expected a table")
    _only(spec, {"url", "format", "timeout"}, "heartbeat")
    url = resolve_secret(spec.get("url"), "heartbeat.url", inline_ok=True, env=env)
    fmt = ping_format(spec.get("format", "healthchecks"), "heartbeat.format")
    return DeadMansSwitch(url, fmt, timeout=_timeout(spec, "heartbeat"))


def _job_pings(spec: Any, env: Mapping[str, str]) -> JobPings | None:
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ConfigurationError("job_pings: expected a table")
    _only(spec, {"url", "format", "jobs", "timeout"}, "job_pings")
    url = resolve_secret(spec.get("url"), "job_pings.url", inline_ok=True, env=env)
    jobs = _strings(spec, "jobs", "job_pings") if "jobs" in spec else None
    fmt = ping_format(spec.get("format", "healthchecks"), "job_pings.format")
    return JobPings(url, fmt, jobs=jobs, timeout=_timeout(spec, "job_pings"))


__all__ = [
    "CONFIG_ENV",
    "HEARTBEAT_FORMAT_ENV",
    "HEARTBEAT_URL_ENV",
    "TOML_ENV",
    "WEBHOOK_ENV",
    "AlertingSettings",
    "load_settings",
]
