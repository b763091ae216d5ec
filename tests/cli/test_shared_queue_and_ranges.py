"""Operator commands on a store and queue two job modules share, and backfill's range: what
one module's command does to the other's work, and windows whose time has not come."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronwarden.adapters.local import SQLiteStore
from cronwarden.model import format_window
from cronwarden.model.ports import RUN, Key
from cronwarden.model.records import RunRecord
from tests.integration.test_cli import cw

HOURLY = """
import cronwarden

@cronwarden.job("hourly", cron="0 * * * *", max_runtime="1m")
def hourly(ctx):
    pass
"""

OTHER = """
import cronwarden

@cronwarden.job("other", cron="0 * * * *", max_runtime="1m")
def other(ctx):
    pass
"""

FAILING = """
import cronwarden

@cronwarden.job("billing-sync", cron="*/5 * * * *", max_runtime="1m",
                retry=cronwarden.Retry(max_attempts=3, min_backoff="1h", max_backoff="1h"),
                liveness=cronwarden.Liveness(failure_threshold=1))
def billing_sync(ctx):
    raise RuntimeError("upstream down")
"""

RENAMED = """
import cronwarden

@cronwarden.job("billing-sync-v2", cron="*/5 * * * *", max_runtime="1m")
def billing_sync(ctx):
    pass
"""

_HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def _modules(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "hourly_jobs.py").write_text(HOURLY)
    (tmp_path / "other_jobs.py").write_text(OTHER)
    return str(tmp_path / "hourly_jobs.py"), str(tmp_path / "other_jobs.py")


def _backfill(
    tmp_path: Path, jobs: str, first: str, last: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``cronwarden backfill --jobs JOBS hourly --from FIRST [--to LAST]``."""
    to = ["--to", last] if last is not None else []
    return cw(tmp_path, "backfill", "--jobs", jobs, "hourly", "--from", first, *to)


def _run_state(tmp_path: Path, job: str, window: datetime) -> str | None:
    store = SQLiteStore(str(tmp_path / "state.db"))
    try:
        found = store.get(Key(RUN, job, format_window(window)))
        return None if found is None else RunRecord.from_data(found.data).state.value
    finally:
        store.close()


def test_trigger_leaves_another_modules_queued_windows_for_their_worker(tmp_path: Path) -> None:
    hourly, other = _modules(tmp_path)
    windows = [_HOUR - timedelta(hours=n) for n in (5, 4, 3)]
    queued = _backfill(tmp_path, hourly, format_window(windows[0]), format_window(windows[-1]))
    assert queued.returncode == 0 and "enqueued 3 window(s)" in queued.stdout, queued.stderr
    mine = format_window(_HOUR - timedelta(hours=1))
    ran = cw(tmp_path, "trigger", "--jobs", other, "other", "--window", mine, "-o", "table")
    assert ran.returncode == 0, ran.stderr
    assert "left 3 queued message(s)" in ran.stderr and "hourly (3)" in ran.stderr
    listed = cw(tmp_path, "dlq", "list", "-o", "json")
    assert listed.returncode == 0 and listed.stdout.strip() == "", listed.stdout  # none lost
    for window in windows:
        assert _run_state(tmp_path, "hourly", window) is None  # not run by the wrong module


def test_backfill_refuses_windows_whose_time_has_not_come(tmp_path: Path) -> None:
    hourly, _ = _modules(tmp_path)
    later = format_window(_HOUR + timedelta(hours=3))
    ahead = _backfill(tmp_path, hourly, format_window(_HOUR), later)
    assert ahead.returncode == 2 and "--to" in ahead.stderr and "in the future" in ahead.stderr
    starts_ahead = _backfill(tmp_path, hourly, later)
    assert starts_ahead.returncode == 2 and "--from" in starts_ahead.stderr
    ancient = _backfill(tmp_path, hourly, "0001-01-01T00:00Z", "0001-01-01T03:00Z")
    assert ancient.returncode == 2 and "out of range" in ancient.stderr
    assert _run_state(tmp_path, "hourly", _HOUR + timedelta(hours=1)) is None


def test_check_is_not_healthy_while_a_renamed_jobs_alert_reached_nobody(tmp_path: Path) -> None:
    (tmp_path / "v1.py").write_text(FAILING)
    (tmp_path / "v2.py").write_text(RENAMED)
    failed = cw(tmp_path, "run", "--jobs", str(tmp_path / "v1.py"), "--once", "-o", "table")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    checked = cw(tmp_path, "check", "--jobs", str(tmp_path / "v2.py"))
    assert "UNDELIVERED billing-sync" in checked.stdout
    assert checked.returncode == 1, checked.stdout
    assert "ok:" not in checked.stdout
    assert "billing-sync: alert(s) on record" in checked.stderr
    once = cw(tmp_path, "run", "--jobs", str(tmp_path / "v2.py"), "--once", "-o", "json")
    assert once.returncode == 1 and "billing-sync (not declared here)" in once.stdout


WITH_CONSUMER = """
import cronwarden

@cronwarden.job("boom", cron="*/5 * * * *", max_runtime="1m", retry=cronwarden.Retry(1))
def boom(ctx):
    raise RuntimeError("boom")

@cronwarden.consumer("evbad", key="id", max_runtime="1m", retry=cronwarden.Retry(1))
def evbad(ctx):
    raise RuntimeError("bad event")
"""

FAILING_OTHER = """
import cronwarden

@cronwarden.job("other", cron="0 * * * *", max_runtime="1m", retry=cronwarden.Retry(1))
def other(ctx):
    raise RuntimeError("other down")
"""


def test_dlq_list_and_redrive_with_jobs_keep_to_the_module(tmp_path: Path) -> None:
    from cronwarden.adapters.local import LocalProvider
    from cronwarden.jobs.config import load_jobs
    from cronwarden.jobs.consumers import publish

    (tmp_path / "a_jobs.py").write_text(WITH_CONSUMER)
    (tmp_path / "b_jobs.py").write_text(FAILING_OTHER)
    a, b = str(tmp_path / "a_jobs.py"), str(tmp_path / "b_jobs.py")
    for n in (3, 2, 1):  # three of the other module's windows, dead-lettered first (oldest)
        window = format_window(_HOUR - timedelta(hours=n))
        out = cw(tmp_path, "trigger", "--jobs", b, "other", "--window", window)
        assert out.returncode == 1, out.stdout + out.stderr
    boom = cw(tmp_path, "trigger", "--jobs", a, "boom")
    assert boom.returncode == 1, boom.stdout + boom.stderr
    provider = LocalProvider(str(tmp_path / "state.db"))
    try:
        load_jobs(a)
        publish("evbad", {"id": "x1"}, publisher=provider.queue())
    finally:
        provider.close()
    drained = cw(tmp_path, "run", "--jobs", a, "--once", "-o", "json")
    assert "evbad:e:x1" in drained.stdout + drained.stderr
    assert "not declared here" not in drained.stdout  # a consumer is declared too
    checked = cw(tmp_path, "check", "--jobs", a)
    assert "does not declare" not in checked.stderr, checked.stderr
    listed = cw(tmp_path, "dlq", "list", "--jobs", a, "--limit", "2", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 2, listed.stdout  # --limit counts this module's letters only
    assert any('"evbad:e:x1"' in row for row in rows), rows  # a consumer's letter shows
    assert not any('"other:' in row for row in rows), rows
    refused = cw(tmp_path, "dlq", "redrive", "--jobs", a, "--limit", "10")
    assert refused.returncode == 2, refused.stdout
    assert "(other)" in refused.stderr and "does not declare" in refused.stderr
    theirs = cw(tmp_path, "dlq", "redrive", "--jobs", b, "--limit", "3")
    assert theirs.returncode == 0 and "redrove 3 message(s)" in theirs.stdout, theirs.stderr


DEPENDENT = """
import cronwarden

@cronwarden.job("upstream", cron="0 * * * *", max_runtime="1m")
def upstream(ctx):
    pass

@cronwarden.job("child", after="upstream", max_runtime="1m")
def child(ctx):
    pass
"""


def test_triggering_a_dependent_job_whose_upstream_has_not_run_says_why(tmp_path: Path) -> None:
    (tmp_path / "dep_jobs.py").write_text(DEPENDENT)
    window = format_window(_HOUR - timedelta(hours=2))
    out = cw(
        tmp_path,
        "trigger",
        "--jobs",
        str(tmp_path / "dep_jobs.py"),
        "child",
        "--window",
        window,
        "-o",
        "table",
    )
    assert out.returncode == 1, out.stdout
    assert f"not ok: child:{window} did not run: waits on upstream" in out.stdout
