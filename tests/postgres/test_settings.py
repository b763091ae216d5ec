"""Settings, DSN redaction, provider selection and import weight: no server needed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cronwarden.adapters.postgres import PostgresProvider, PostgresSettings
from cronwarden.adapters.postgres.settings import redact_dsn
from cronwarden.jobs.config import provider_from_env
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.redaction import redact

SECRET = "pw-Zq8-s3cret"


def test_from_env_reads_every_setting_and_to_env_round_trips() -> None:
    env = {
        "CRONWARDEN_POSTGRES_DSN": f"postgresql://cw:{SECRET}@db:5432/cw",
        "CRONWARDEN_POSTGRES_SCHEMA": "jobs_prod",
        "CRONWARDEN_POSTGRES_POOL_MIN": "2",
        "CRONWARDEN_POSTGRES_POOL_MAX": "20",
        "CRONWARDEN_POSTGRES_CONNECT_TIMEOUT": "3",
        "CRONWARDEN_POSTGRES_POOL_TIMEOUT": "2.5",
        "CRONWARDEN_POSTGRES_STATEMENT_TIMEOUT": "15",
        "CRONWARDEN_POSTGRES_MAX_DELIVERIES": "7",
        "CRONWARDEN_POSTGRES_DEDUP_WINDOW": "120",
        "CRONWARDEN_POSTGRES_EXPIRE_EVERY": "0",
        "CRONWARDEN_POSTGRES_EXPIRE_BATCH": "50",
    }
    settings = PostgresSettings.from_env(env)
    assert settings.schema == "jobs_prod" and settings.pool_max == 20
    assert settings.pool_timeout == 2.5 and settings.expire_every == 0
    assert settings.max_deliveries == 7
    assert PostgresSettings.from_env(settings.to_env()) == settings
    assert set(settings.to_env()) == set(env)
    assert set(PostgresSettings.env_names().values()) == set(env)


def test_defaults_and_overrides() -> None:
    settings = PostgresSettings.from_env({"CRONWARDEN_POSTGRES_DSN": "host=a"}, dsn="host=b")
    assert settings.dsn == "host=b"  # --dsn wins over the environment
    assert settings.schema == "cronwarden" and settings.max_deliveries == 10


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "needs a DSN"),
        ({"CRONWARDEN_POSTGRES_POOL_MAX": "0"}, "CRONWARDEN_POSTGRES_POOL_MAX=0"),
        ({"CRONWARDEN_POSTGRES_MAX_DELIVERIES": "many"}, "not a valid int"),
        ({"CRONWARDEN_POSTGRES_EXPIRE_EVERY": "0.5"}, "or be 0"),
        ({"CRONWARDEN_POSTGRES_SCHEMA": "Robert'); DROP"}, "lower-case letters"),
        ({"CRONWARDEN_POSTGRES_POOL_MIN": "5", "CRONWARDEN_POSTGRES_POOL_MAX": "2"}, "exceed"),
    ],
)
def test_bad_settings_are_refused_with_the_variable_name(env: dict[str, str], message: str) -> None:
    base = {} if not env else {"CRONWARDEN_POSTGRES_DSN": "host=db"}
    with pytest.raises(ConfigurationError, match=message):
        PostgresSettings.from_env({**base, **env})


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://cw:{SECRET}@db.internal:5432/cw?sslmode=require",
        f"postgres://cw@db/cw?password={SECRET}&sslmode=require",
        f"host=db user=cw password={SECRET} dbname=cw",
        f"host=db user=cw password='{SECRET}' dbname=cw",
    ],
)
def test_dsn_password_never_shown(dsn: str) -> None:
    settings = PostgresSettings(dsn=dsn)
    assert SECRET not in settings.display_dsn and "***" in settings.display_dsn
    assert SECRET not in redact_dsn(dsn)
    assert SECRET not in repr(settings)
    # registered: any later log line or error snippet that quotes it is masked too
    assert SECRET not in redact(f"connection failed for {dsn} with password {SECRET}")
    assert "db" in settings.display_dsn


def test_provider_is_chosen_by_name_and_takes_the_dsn_option() -> None:
    provider = provider_from_env("postgres", dsn=f"postgresql://cw:{SECRET}@db/cw")
    assert isinstance(provider, PostgresProvider) and provider.name == "postgres"
    assert SECRET not in repr(provider)
    provider.close()  # nothing was opened: nothing connects before the first operation


def test_import_cronwarden_and_the_adapter_do_not_import_the_driver() -> None:
    code = (
        "import sys\n"
        "import cronwarden, cronwarden.jobs.config\n"
        "assert not [m for m in sys.modules if m.startswith('psycopg')], 'core'\n"
        "import cronwarden.adapters.postgres\n"
        "from cronwarden.adapters.postgres import PostgresSettings\n"
        "PostgresSettings(dsn='host=x')\n"
        "print([m for m in sys.modules if m.startswith('psycopg')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_refuses_dsn_for_another_provider(tmp_path: object) -> None:
    from click.testing import CliRunner

    from cronwarden.cli import cli

    result = CliRunner().invoke(
        cli, ["dlq", "list", "--provider", "local", "--dsn", f"postgresql://u:{SECRET}@h/d"]
    )
    assert result.exit_code != 0
    assert "--dsn applies to --provider postgres only" in result.output
    assert SECRET not in result.output
