"""Secret shapes the one rule set must mask (env names, camelCase keys, Authorization schemes,
JWTs, webhook URLs, odd DSN passwords, token prefixes, bytes literals), the context it must keep
readable (identifiers, descriptors of secrets, ports, prose after a setting's path), and
run_command registering env values by the variable's name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cronwarden import redact
from cronwarden.jobs.command import CommandFailed, run_command
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.redaction import is_secret_name
from cronwarden.testing import capture_events
from cronwarden.watch.alerting.secrets import resolve_secret

SECRET = "Zq7vN2kLw9xR4tPa"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # env-style names with and without separators, any case
        (f"PGPASSWORD={SECRET}", "PGPASSWORD="),
        (f"pgpassword={SECRET}", "pgpassword="),
        (f"export MYSQL_PWD={SECRET}", "export MYSQL_PWD="),
        (f"MYSQL_ROOT_PASSWORD={SECRET}", "MYSQL_ROOT_PASSWORD="),
        (f"AWS_SESSION_TOKEN={SECRET}", "AWS_SESSION_TOKEN="),
        (f"DB_PASS={SECRET} DB_USER=svc", "DB_USER=svc"),
        (f"--db-password={SECRET} --db-user=svc", "--db-user=svc"),
        (f"passphrase={SECRET}", "passphrase="),
        (f"auth={SECRET}&user=svc", "user=svc"),
        (f"client_credentials={SECRET}", "client_credentials="),
        (f"db.password={SECRET}", "db.password="),
        # JSON / dict keys, camelCase and snake_case, str and bytes values
        (f'{{"accessToken": "{SECRET}", "user": "svc"}}', '"user": "svc"'),
        (f'{{"clientSecret": "{SECRET}"}}', '"clientSecret": ***'),
        (f"{{'private_key': '{SECRET}'}}", "'private_key': ***"),
        (f'{{"apiKey": "{SECRET}"}}', '"apiKey": ***'),
        (f"{{'password': b'{SECRET}'}}", "{'password': ***}"),
        (f'{{"password": "ab\\"{SECRET}"}}', '{"password": ***}'),
        # headers: the scheme stays readable
        (f"Authorization: Token {SECRET}", "Authorization: Token ***"),
        (f"Authorization: Basic {SECRET}", "Authorization: Basic ***"),
        (f"authorization: bearer {SECRET}", "authorization: bearer ***"),
        (f"X-Api-Key: {SECRET}", "X-Api-Key: ***"),
        (f"X-Auth-Token: {SECRET}", "X-Auth-Token: ***"),
        # JWTs anywhere
        (
            f"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.{SECRET} rejected",
            "token *** rejected",
        ),
        # webhook URLs whose path is the credential
        (
            f"POST https://hooks.slack.com/services/T0001/B0001/{SECRET} failed",
            "https://hooks.slack.com/services/*** failed",
        ),
        (
            f"https://discord.com/api/webhooks/123456789/{SECRET}",
            "https://discord.com/api/webhooks/***",
        ),
        (
            f"https://contoso.webhook.office.com/webhookb2/a@b/IncomingWebhook/{SECRET}/c",
            "https://contoso.webhook.office.com/***",
        ),
        # DSN passwords with "/" or a space (not percent-encoded)
        (f"postgresql://user:pa/{SECRET}@db.internal/app", "@db.internal/app"),
        (f"postgresql://user:pa {SECRET}@db.internal/app", "postgresql://user:***@db.internal"),
        # well-known token prefixes
        (f"sk_live_{SECRET}", "sk_live_***"),
        (f"sk_test_{SECRET}", "sk_test_***"),
        (f"rk_live_{SECRET}", "rk_live_***"),
        (f"ghs_{SECRET}", "ghs_***"),
        (f"glpat-{SECRET}", "glpat-***"),
        (f"npm_{SECRET}{SECRET}abcd", "npm_***"),
        (f"xoxp-{SECRET}", "xoxp-***"),
        (f"SG.{SECRET}abc.{SECRET}", "SG.***"),
    ],
)
def test_secret_shapes_are_masked_and_context_kept(text: str, kept: str) -> None:
    out = redact(text)
    assert SECRET not in out
    assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "run_key=billing-sync:2026-01-20T02:00Z idempotency_key: cust-1",
        "max_tokens=100 token_count=5 token_type=bearer",
        "PASSWORD_FILE=/run/secrets/db SecretName=prod/db TOKEN_URL=https://auth.example.com/t",
        "npm_config_cache=/tmp/npm npm_lifecycle_event=test",
        "bypass=true author=ann",
        "secret.py:12: AssertionError",
        "GET https://example.com:8443/users/@me",
        "see http://host:8080 and mail me@example.com",
        '{"AccessKeyId": "id-1", "event": "run.failed"}',
    ],
)
def test_identifiers_descriptors_and_ports_stay_readable(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "channels.hook.secret (env:HOOKSECRET): the environment variable is not set or empty",
        "channels.hook.secret (file:/run/secrets/hook): cannot read it: No such file or directory",
        "channels.hook.secret is given inline: give the secret by reference (env:NAME or "
        "file:/path)",
        "channels.mail.password is not set: expected env:NAME, file:/path or a value",
    ],
)
def test_the_settings_errors_about_a_secret_read_in_full(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # a value after `name: ` is masked, even one word followed by a sentence: prose in an
        # error message is no proof that the word before it is not the password
        ("channels.hook.secret: letmein", "channels.hook.secret: ***"),
        ('password: "letmein is it"', "password: ***"),
        ("password: letmein is wrong", "password: *** is wrong"),
        ("password: hunter2 is wrong", "password: *** is wrong"),
        ("password: Letmein is wrong", "password: *** is wrong"),
        ("passphrase: correct horse battery staple", "passphrase: ***"),
        ("password=letmein is not it", "password=*** is"),
        ("Authorization: token letmein is wrong", "Authorization: token *** is"),
    ],
)
def test_values_that_look_like_words_are_still_masked(text: str, kept: str) -> None:
    out = redact(text)
    assert "letmein" not in out and "hunter2" not in out and "Letmein" not in out
    assert "correct" not in out
    assert kept in out


def test_an_unset_secret_reference_error_keeps_its_wording() -> None:
    with pytest.raises(ConfigurationError) as error:
        resolve_secret("env:CW_UNSET_HOOK_SECRET", "channels.hook.secret", env={})
    assert redact(f"error: {error.value}") == (
        "error: channels.hook.secret (env:CW_UNSET_HOOK_SECRET): the environment variable is "
        "not set or empty"
    )


@pytest.mark.parametrize(
    "name",
    [
        "PGPASSWORD", "MYSQL_PWD", "DB_PASS", "accessToken", "clientSecret", "private_key",
        "privateKey", "APIKEY", "x-api-key", "AccountKey", "SharedAccessKey", "passphrase",
        "auth", "HTTP_AUTH", "Authorization", "GOOGLE_APPLICATION_CREDENTIALS_JSON", "sig",
        "key", "AWS_SECRET_ACCESS_KEY", "vault_secret_id",
    ],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "run_key", "idempotency_key", "AccessKeyId", "SharedAccessKeyName", "max_tokens",
        "PASSWORD_FILE", "TOKEN_URL", "SecretName", "AUTH_METHOD", "author", "bypass", "HOME",
        "PATH", "npm_config_cache",
    ],
)  # fmt: skip
def test_names_that_are_not_secrets(name: str) -> None:
    assert not is_secret_name(name)


def test_env_values_are_registered_by_the_variables_name() -> None:
    value = "n0tShaped-like-a-token-4d1f"
    with capture_events() as events, pytest.raises(CommandFailed) as failure:
        run_command('echo "psql with $PGPASSWORD"; exit 1', env={"PGPASSWORD": value})
    assert value not in str(failure.value)
    assert "psql with ***" in str(failure.value)
    logged = json.dumps(events)
    assert value not in logged and "psql with ***" in logged


def test_the_working_directory_is_not_registered_as_a_secret(tmp_path: Path) -> None:
    result = run_command('echo "in $PWD"', env={"PWD": str(tmp_path)}, cwd=str(tmp_path))
    assert result.output_tail == f"in {tmp_path}\n"
