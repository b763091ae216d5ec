"""The AWS function host: a webhook URL read by reference joins the alerting settings file's
channels (it used to replace them: the file's PagerDuty and Slack routes were never told)."""

from __future__ import annotations

import uuid

import pytest

from cronwarden.emulators.aws import MotoServer
from tests.aws import e2e_jobs


def test_a_webhook_by_reference_joins_the_settings_files_channels(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cronwarden.adapters.aws import AwsProvider
    from cronwarden.adapters.aws.functions import make_handlers, runtime_of
    from cronwarden.adapters.aws.secrets import SECRET_ENV
    from cronwarden.watch.alerting.routing import Router

    url = "https://hooks.example.com/services/T000/B000/very-secret-token"
    name = f"cw-webhook-{uuid.uuid4().hex[:6]}"
    moto_server.client("secretsmanager").create_secret(Name=name, SecretString=url)
    monkeypatch.setenv(SECRET_ENV, name)
    monkeypatch.setenv(
        "CRONWARDEN_ALERTING_TOML",
        '[channels.chat]\ntype = "slack"\nurl = "https://hooks.example.com/services/chat"\n',
    )
    settings = moto_server.settings()
    for key, value in settings.to_env().items():
        monkeypatch.setenv(key, value)
    provider = AwsProvider(settings)
    _, _, watcher = make_handlers(e2e_jobs, provider=provider)
    try:
        runtime = runtime_of(watcher)
        runtime.load_secrets()
        (router,) = runtime.watcher.notifiers
        assert isinstance(router, Router)
        assert sorted(route.channel.name for route in router.routes) == ["chat", "webhook"]
    finally:
        provider.close()
