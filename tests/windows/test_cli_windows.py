"""[windows] The operator's side: ``trigger --window`` validation, ``dlq windows``, ``dlq
resolve`` and ``dlq redrive --job --window``, as users run them (real processes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from cronwarden import RunRequest
from cronwarden.adapters.local import SQLiteStore
from cronwarden.model import RunState, format_window
from cronwarden.model.ports import RUN, Key
from cronwarden.model.records import RunRecord
from tests.integration.test_cli import cw

JOBS = """
import cronwarden

@cronwarden.job("fragile", cron="*/15 * * * *", max_runtime="1m", overlap="skip",
                retry=cronwarden.Retry(1, 0, 0))
def fragile(ctx):
    import os
    if os.path.exists(os.environ["CW_FAIL_FLAG"]):
        raise RuntimeError("upstream down")
"""


_LATEST = datetime.now(UTC).replace(second=0, microsecond=0)
_LATEST = _LATEST.replace(minute=_LATEST.minute // 15 * 15)
W1 = format_window(_LATEST - timedelta(minutes=30))
W2 = format_window(_LATEST - timedelta(minutes=15))


def _in_berlin_winter(window: str) -> str:
    """``window`` written at UTC+01:00 with seconds (``2026-01-20T03:00:00+01:00``)."""
    when = datetime.fromisoformat(window).astimezone(timezone(timedelta(hours=1)))
    return when.isoformat()


def _setup(tmp_path: Path) -> tuple[str, dict[str, str]]:
    jobs = tmp_path / "fragile_jobs.py"
    jobs.write_text(JOBS)
    return str(jobs), {"CW_FAIL_FLAG": str(tmp_path / "fail")}


def test_trigger_window_refuses_future_and_non_windows_with_one_line(tmp_path: Path) -> None:
    jobs, env = _setup(tmp_path)
    future = cw(
        tmp_path, "trigger", "--jobs", jobs, "fragile", "--window", "2030-01-01T00:00Z", env=env
    )
    assert future.returncode == 2
    assert future.stderr.count("\n") == 1 and "in the future" in future.stderr
    floored = cw(
        tmp_path, "trigger", "--jobs", jobs, "fragile", "--window", "2026-01-20T02:07Z", env=env
    )
    assert floored.returncode == 2
    assert "2026-01-20T02:00Z before" in floored.stderr
    assert "2026-01-20T02:15Z after" in floored.stderr


def test_dead_letter_listed_resolved_and_redriven_by_window(tmp_path: Path) -> None:
    jobs, env = _setup(tmp_path)
    (tmp_path / "fail").touch()
    first = cw(tmp_path, "trigger", "--jobs", jobs, "fragile", "--window", W1, env=env)
    assert first.returncode == 1, first.stderr  # dead-lettered: [operator]'s exit status
    second = cw(tmp_path, "trigger", "--jobs", jobs, "fragile", "--window", W2, env=env)
    assert second.returncode == 1, second.stderr
    store = SQLiteStore(str(tmp_path / "state.db"))
    try:
        for window in (W1, W2):
            record = store.get(Key(RUN, "fragile", window))
            assert record is not None
            assert RunRecord.from_data(record.data).state is RunState.DEAD_LETTERED
    finally:
        store.close()
    listed = cw(tmp_path, "dlq", "windows", "--jobs", jobs, env=env)
    assert listed.returncode == 0, listed.stderr
    assert f"fragile {W1}" in listed.stdout
    resolved = cw(
        tmp_path,
        "dlq",
        "resolve",
        "--jobs",
        jobs,
        "--job",
        "fragile",
        "--window",
        W1.removesuffix("Z"),  # "ISO, UTC": a time without an offset is UTC, as everywhere
        "--reason",
        "re-sent by hand",
        env=env,
    )
    assert resolved.returncode == 0, resolved.stderr
    assert "re-sent by hand" in resolved.stdout
    (tmp_path / "fail").unlink()
    redriven = cw(
        tmp_path,
        "dlq",
        "redrive",
        "--jobs",
        jobs,
        "--job",
        "fragile",
        "--window",
        _in_berlin_winter(W2),  # the same instant with an offset
        env=env,
    )
    assert redriven.returncode == 0, redriven.stderr
    assert f"redrove fragile:{W2}" in redriven.stdout
    again = cw(
        tmp_path,
        "dlq",
        "redrive",
        "--jobs",
        jobs,
        "--job",
        "fragile",
        "--window",
        W1,
        env=env,
    )
    assert again.returncode == 2 and "is not dead-lettered (excused)" in again.stderr
    assert RunRequest  # (the request type the redrive enqueues)
