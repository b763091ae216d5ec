"""``cronwarden doctor`` on the local provider: every check passing, then deliberately broken
set-ups (a store it may not write, a delivery limit below a job's retry budget, no watcher,
a revoked webhook), the probe answered by a real worker, and real messages left unrun."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import cronwarden
from cronwarden import JobSet, RunContext, RunRequest, Watcher
from cronwarden.adapters.local import LocalProvider
from cronwarden.cli import cli
from cronwarden.hosting.trigger import Worker
from cronwarden.model.ports import RUN, STATUS, Key
from cronwarden.ops.doctor import Doctor, failed
from cronwarden.watch.alerting.settings import load_settings
from cronwarden.watch.probe import DOCTOR_RECORD
from tests.ops.conftest import HttpSink, SmtpSink

JOBS = """
import cronwarden

@cronwarden.job("nightly", cron="0 2 * * *", max_runtime="10m",
                retry=cronwarden.Retry(max_attempts={attempts}))
def nightly(ctx):
    ctx.count("rows", 1)
"""


def _jobs(attempts: int = 3) -> JobSet:
    def nightly(ctx: RunContext) -> None:
        return None

    retry = cronwarden.Retry(max_attempts=attempts)
    return JobSet(
        [cronwarden.job("nightly", cron="0 2 * * *", max_runtime="10m", retry=retry)(nightly)]
    )


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    made = LocalProvider(str(tmp_path / "state.db"), max_deliveries=5)
    yield made
    made.close()


def _watched(provider: LocalProvider, jobs: JobSet) -> None:
    Watcher(jobs, provider.store(), provider.queue(), notifiers=[]).check()  # heartbeat


def _settings(http_sink: HttpSink, smtp_sink: SmtpSink) -> str:
    return (
        f'[channels.chat]\ntype = "slack"\nurl = "{http_sink.base}/chat"\n'
        f'[channels.mail]\ntype = "email"\nhost = "{smtp_sink.host}"\nport = {smtp_sink.port}\n'
        'tls = "none"\nfrom = "cw@example.test"\nto = ["ops@example.test"]\n'
    )


def test_every_check_passes_and_nothing_reaches_a_human(
    provider: LocalProvider, http_sink: HttpSink, smtp_sink: SmtpSink
) -> None:
    jobs = _jobs()
    _watched(provider, jobs)
    alerting = load_settings(env={"CRONWARDEN_ALERTING_TOML": _settings(http_sink, smtp_sink)})
    checks = Doctor(jobs, provider, alerting=alerting, worker_wait=0.2, probe_timeout=20).run()
    lines = [c.line() for c in checks]
    assert failed(checks) == [], lines
    names = [c.name for c in checks]
    assert names[:4] == ["store", "queue", "dead-letter queue", "delivery limit"]
    assert "settled by doctor itself" in checks[1].detail
    assert provider.queue().dlq_depth() == 0  # the probe was settled, not dead-lettered
    assert smtp_sink.messages == []  # a dry run sends no mail
    assert [r.body for r in http_sink.at("/chat")] == [b"{}"]  # and posts no alert text
    assert provider.store().get(Key(STATUS, DOCTOR_RECORD)) is None  # cleaned up


def test_a_running_worker_answers_the_probe_and_real_requests_are_not_run(
    provider: LocalProvider,
) -> None:
    jobs = _jobs()
    _watched(provider, jobs)
    real = RunRequest("nightly", cronwarden.Schedule("0 2 * * *").floor(datetime.now(UTC)))
    provider.queue().publish(real.to_json(), attributes={})
    # the doctor alone: it finds the real request, puts it back unrun
    checks = Doctor(jobs, provider, worker_wait=0.0, probe_timeout=20).check_queue()
    assert checks[0].ok is True, checks
    assert "put back unrun" in checks[0].detail
    assert provider.store().query(RUN) == []  # nothing ran
    leftover = provider.queue().receive(10)
    assert [d.body for d in leftover] == [real.to_json()]
    provider.queue().retry(leftover[0], 0)

    # a real worker consuming the queue answers the probe itself
    engine = cronwarden.Engine(jobs, provider.store())
    worker = Worker(engine, provider.queue())
    stop = threading.Event()
    thread = threading.Thread(target=worker.serve, args=(stop,), daemon=True)
    thread.start()
    try:
        checks = Doctor(jobs, provider, worker_wait=30, probe_timeout=30).check_queue()
    finally:
        stop.set()
        thread.join(30)
    assert checks[0].ok is True and f"worker {engine.worker_id}" in checks[0].detail


def test_broken_setups_fail_with_the_fix(
    provider: LocalProvider, http_sink: HttpSink, tmp_path: Path
) -> None:
    jobs = _jobs(attempts=8)  # the queue dead-letters after 5 deliveries
    http_sink.status["/chat"] = 404  # a revoked webhook
    http_sink.redirect["/moved"] = http_sink.base + "/login"  # a webhook moved elsewhere
    chat = f'[channels.chat]\ntype = "slack"\nurl = "{http_sink.base}/chat"\n'
    chat += f'[channels.moved]\ntype = "slack"\nurl = "{http_sink.base}/moved"\n'
    alerting = load_settings(env={"CRONWARDEN_ALERTING_TOML": chat})
    checks = Doctor(
        jobs,
        provider,
        alerting=alerting,
        worker_wait=0.1,
        probe_timeout=10,
        watcher_max_age=timedelta(minutes=5),
    ).run()
    bad = {c.name: c for c in failed(checks)}
    assert set(bad) == {
        "delivery limit for nightly",
        "watcher",
        "notifier chat (slack)",
        "notifier moved (slack)",
    }
    assert (
        "after 5 deliveries but nightly allows 8 attempts"
        in bad["delivery limit for nightly"].detail
    )
    assert "at least 8" in bad["delivery limit for nightly"].fix
    assert "no watcher heartbeat" in bad["watcher"].detail
    assert "HTTP 404" in bad["notifier chat (slack)"].detail
    assert "HTTP 302: a redirect" in bad["notifier moved (slack)"].detail
    assert "/login" not in [r.path for r in http_sink.received]  # never followed


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_store_it_may_not_write_fails(tmp_path: Path) -> None:
    path = tmp_path / "ro" / "state.db"
    path.parent.mkdir()
    LocalProvider(str(path)).store().close()
    path.chmod(stat.S_IRUSR)
    path.parent.chmod(stat.S_IRUSR | stat.S_IXUSR)
    made = LocalProvider(str(path))
    try:
        [check] = Doctor(_jobs(), made).check_store()
    finally:
        made.close()
        path.parent.chmod(stat.S_IRWXU)
    assert check.ok is False and "writable" in check.fix


class ReadOnlyStore:
    """A store whose commits are refused, as a store without write permission refuses them."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def commit(self, ops: object) -> object:
        from cronwarden.model.errors import StoreUnavailable

        raise StoreUnavailable("403 Forbidden: caller does not have permission to write")

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_store_that_refuses_writes_fails(provider: LocalProvider) -> None:
    class Provider:
        name = "gcp"

        def store(self) -> object:
            return ReadOnlyStore(provider.store())

    [check] = Doctor(_jobs(), Provider()).check_store()  # type: ignore[arg-type]
    assert check.ok is False and "Forbidden" in check.detail
    assert "roles/datastore.user" in check.fix


def test_cli_exits_1_on_a_failure_and_0_when_healthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, http_sink: HttpSink
) -> None:
    module = tmp_path / "doctor_jobs.py"
    module.write_text(JOBS.format(attempts=3))
    monkeypatch.setenv("CRONWARDEN_LOCAL_PATH", str(tmp_path / "cli.db"))
    monkeypatch.setenv(
        "CRONWARDEN_ALERTING_TOML",
        f'[channels.chat]\ntype = "slack"\nurl = "{http_sink.base}/chat"\n',
    )
    monkeypatch.delenv("CRONWARDEN_ALERTING_CONFIG", raising=False)
    args = ["doctor", "--jobs", str(module), "--worker-wait", "0.1", "--probe-timeout", "20"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 1, first.output
    assert "FAIL  watcher: no watcher heartbeat" in first.output
    assert "fix: run the watcher" in first.output

    made = LocalProvider(str(tmp_path / "cli.db"))
    try:
        _watched(made, cronwarden.load_jobs(str(module)))
    finally:
        made.close()
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0, second.output
    assert "n/a" not in second.output and "0 failed" in second.output
