"""Settings, URL redaction, provider selection, import weight, and the command line on Redis:
``cronwarden run --once``, ``status`` and ``doctor`` with ``--provider redis`` and nothing
else than ``$CRONWARDEN_REDIS_URL``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cronwarden.adapters.redis import RedisProvider, RedisSettings, RedisStore
from cronwarden.adapters.redis.settings import redact_url
from cronwarden.jobs.config import provider_from_env
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import RUN, STATUS
from cronwarden.model.redaction import redact
from tests.support.procs import ROOT

from . import cli_jobs

SECRET = "pw-Rd9-s3cret"


def test_from_env_reads_every_setting_and_to_env_round_trips() -> None:
    env = {
        "CRONWARDEN_REDIS_URL": f"rediss://cw:{SECRET}@cache:6380/2",
        "CRONWARDEN_REDIS_CLUSTER": "true",
        "CRONWARDEN_REDIS_PREFIX": "prod",
        "CRONWARDEN_REDIS_QUEUE": "jobs",
        "CRONWARDEN_REDIS_TIMEOUT": "3",
        "CRONWARDEN_REDIS_MAX_DELIVERIES": "7",
        "CRONWARDEN_REDIS_DEDUP_WINDOW": "120",
        "CRONWARDEN_REDIS_WAIT_REPLICAS": "1",
        "CRONWARDEN_REDIS_WAIT_TIMEOUT": "0.5",
    }
    settings = RedisSettings.from_env(env)
    assert settings.cluster and settings.prefix == "prod" and settings.queue == "jobs"
    assert (settings.timeout, settings.max_deliveries, settings.wait_replicas) == (3, 7, 1)
    assert RedisSettings.from_env(settings.to_env()) == settings
    assert SECRET not in repr(settings) and SECRET not in settings.display_url


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "CRONWARDEN_REDIS_URL"),
        ({"CRONWARDEN_REDIS_URL": "http://x"}, "redis://"),
        ({"CRONWARDEN_REDIS_URL": "redis://x", "CRONWARDEN_REDIS_TIMEOUT": "x"}, "TIMEOUT"),
        ({"CRONWARDEN_REDIS_URL": "redis://x", "CRONWARDEN_REDIS_TIMEOUT": "0"}, "TIMEOUT"),
        ({"CRONWARDEN_REDIS_URL": "redis://x", "CRONWARDEN_REDIS_PREFIX": "a b"}, "PREFIX"),
        ({"CRONWARDEN_REDIS_URL": "redis://x", "CRONWARDEN_REDIS_QUEUE": "{q}"}, "QUEUE"),
    ],
)
def test_bad_settings_are_refused_with_the_variable_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RedisSettings.from_env(env)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@cache:6379/0",
        f"redis://user:{SECRET}@cache:6379/0",
        f"rediss://cache:6379/0?password={SECRET}",
    ],
)
def test_url_password_never_shown(url: str) -> None:
    settings = RedisSettings(url=url)
    assert SECRET not in settings.display_url and "cache" in settings.display_url
    assert SECRET not in redact_url(url)
    assert SECRET not in redact(f"connect to {url} failed with {SECRET}")


def test_provider_is_chosen_by_name_and_connects_on_first_use() -> None:
    provider = provider_from_env("redis", url=f"redis://:{SECRET}@127.0.0.1:1/0")
    assert isinstance(provider, RedisProvider) and provider.name == "redis"
    assert SECRET not in repr(provider)
    provider.close()  # nothing was opened


def test_import_cronwarden_and_the_adapter_do_not_import_the_driver() -> None:
    code = (
        "import sys\n"
        "import cronwarden, cronwarden.jobs.config\n"
        "assert 'redis' not in sys.modules, 'core'\n"
        "import cronwarden.adapters.redis\n"
        "from cronwarden.adapters.redis import RedisSettings, RedisProvider\n"
        "RedisProvider(RedisSettings(url='redis://x'))\n"
        "print([m for m in sys.modules if m == 'redis' or m.startswith('redis.')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _cli(tmp_path: Path, url: str, prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CRONWARDEN_PROVIDER": "redis",
        "CRONWARDEN_REDIS_URL": url,
        "CRONWARDEN_REDIS_PREFIX": prefix,
    }
    argv = [sys.executable, "-c", "from cronwarden.cli import main; main()", *args]
    return subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.redis
@pytest.mark.slow
def test_run_status_and_doctor_on_redis(tmp_path: Path, redis_url: str, redis_prefix: str) -> None:
    jobs = str(Path(cli_jobs.__file__))
    ran = _cli(tmp_path, redis_url, redis_prefix, "run", "--once", "--jobs", jobs)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    store = RedisStore(RedisSettings(url=redis_url, prefix=redis_prefix))
    try:
        runs = store.query(RUN, "hourly")
        assert len(runs) == 1 and runs[0].data["state"] == "succeeded"
        statuses = {r.key.job: r.data for r in store.query(STATUS)}
        assert statuses["hourly"]["consecutive_failures"] == 0, statuses
    finally:
        store.close()

    shown = _cli(tmp_path, redis_url, redis_prefix, "status", "--jobs", jobs, "-o", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    rows = [json.loads(line) for line in shown.stdout.splitlines() if line.startswith("{")]
    assert [r.get("job") for r in rows if "job" in r] == ["hourly"], shown.stdout

    checked = _cli(tmp_path, redis_url, redis_prefix, "doctor", "--jobs", jobs)
    text = checked.stdout + checked.stderr
    assert "store" in text.lower() and "queue" in text.lower(), text
    assert "Traceback" not in text


@pytest.mark.redis
def test_cli_on_an_unreachable_redis_fails_in_one_line_without_the_password(
    tmp_path: Path,
) -> None:
    from cronwarden.emulators._process import free_port

    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    jobs = str(Path(cli_jobs.__file__))
    shown = _cli(tmp_path, url, "cw", "status", "--jobs", jobs)
    assert shown.returncode != 0
    assert SECRET not in shown.stdout + shown.stderr
    assert "Traceback" not in shown.stderr


@pytest.mark.redis
def test_an_evicting_server_is_warned_about(
    redis_url: str, redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    import redis

    admin = redis.Redis.from_url(redis_url)
    try:
        provider = RedisProvider(RedisSettings(url=redis_url, prefix=redis_prefix))
        provider.store()
        assert provider.eviction_policy() == "noeviction"
        assert "maxmemory-policy" not in caplog.text
        provider.close()
        admin.config_set("maxmemory-policy", "volatile-lru")
        provider = RedisProvider(RedisSettings(url=redis_url, prefix=redis_prefix))
        with caplog.at_level("WARNING", logger="cronwarden.redis"):
            provider.store()
        assert "maxmemory-policy volatile-lru" in caplog.text and "noeviction" in caplog.text
        provider.close()
    finally:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()
