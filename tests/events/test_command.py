"""run_command: exit status as the outcome, bounded redacted output, timeouts that kill the
whole process group, cron's stdin, secrets kept out of what it reports."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import cronwarden
from cronwarden.jobs.command import CommandFailed, CommandTimedOut, run_command
from cronwarden.model.errors import ConfigurationError
from cronwarden.testing import capture_events, run_once


def test_success_returns_the_tail_and_counts() -> None:
    result = run_command("echo out; echo err >&2")
    assert result.exit_status == 0
    assert result.output_tail == "out\nerr\n"
    assert result.output_bytes == len("out\nerr\n")


def test_non_zero_exit_raises_with_the_tail() -> None:
    with pytest.raises(CommandFailed) as failure:
        run_command("echo 'disk full'; exit 3")
    assert failure.value.exit_status == 3
    assert str(failure.value) == "command exited with status 3; output tail: disk full"


def test_killed_by_a_signal_is_a_failure() -> None:
    with pytest.raises(CommandFailed, match="killed by signal SIGKILL"):
        run_command("kill -9 $$")


def test_output_is_bounded_to_the_tail() -> None:
    result = run_command("seq 1 200000", tail_chars=20)
    assert result.output_tail.endswith("199999\n200000\n")
    assert len(result.output_tail) == 20
    assert result.output_bytes == len("".join(f"{i}\n" for i in range(1, 200001)))


def test_stdin_is_sent_and_env_is_laid_over_the_workers() -> None:
    result = run_command(
        'cat; printf "%s|%s" "$GREETING" "$HOME"',
        stdin="line one\nline two",
        env={"GREETING": "hi"},
    )
    assert result.output_tail == f"line one\nline twohi|{os.environ.get('HOME', '')}"


def test_secrets_are_redacted_from_the_tail_and_the_error() -> None:
    with pytest.raises(CommandFailed) as failure:
        run_command(
            'echo "connecting with $DB_PASSWORD and password=abc123xyz"; exit 1',
            env={"DB_PASSWORD": "tops3cretvalue"},
        )
    assert "tops3cretvalue" not in str(failure.value)
    assert "abc123xyz" not in str(failure.value)
    assert "connecting with *** and password=***" in str(failure.value)


def test_required_environment_must_be_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CW_TEST_TOKEN_X", raising=False)
    with pytest.raises(ConfigurationError, match="CW_TEST_TOKEN_X is not set"):
        run_command("true", require_env=["CW_TEST_TOKEN_X"])
    monkeypatch.setenv("CW_TEST_TOKEN_X", "value-from-the-vault")
    result = run_command('echo "$CW_TEST_TOKEN_X"', require_env=["CW_TEST_TOKEN_X"])
    assert result.output_tail == "***\n"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    started = time.monotonic()
    with pytest.raises(CommandTimedOut, match="timed out after 1s") as failure:
        run_command(f"sleep 60 & echo $! > {marker}; echo started; wait", timeout=1, kill_grace=1)
    assert time.monotonic() - started < 30  # a bound on a hang, not a performance claim
    assert "started" in failure.value.output_tail
    child = int(marker.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the background child of the command survived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_as_a_handler_the_exit_status_is_the_outcome() -> None:
    @cronwarden.job("ok-cmd", cron="0 * * * *", max_runtime="1m")
    def ok(ctx: cronwarden.RunContext) -> None:
        cronwarden.run_command("echo done", ctx)

    @cronwarden.job(
        "bad-cmd", cron="0 * * * *", max_runtime="1m", retry=cronwarden.Retry(max_attempts=1)
    )
    def bad(ctx: cronwarden.RunContext) -> None:
        cronwarden.run_command("echo 'no such table: users' >&2; exit 2", ctx)

    with capture_events() as events:
        good = run_once(ok, "2026-01-20T02:00Z")
        failed = run_once(bad, "2026-01-20T02:00Z")
    assert good.kind is cronwarden.OutcomeKind.SUCCEEDED
    assert good.counters["command_exit_status"] == 0
    assert good.counters["command_output_bytes"] == len("done\n")
    assert failed.kind is cronwarden.OutcomeKind.DEAD_LETTERED
    assert "command exited with status 2; output tail: no such table: users" in failed.detail
    completed = [e for e in events if e.get("event") == "command.completed"]
    assert completed and completed[0]["output_tail"] == "done\n"
    assert completed[0]["job"] == "ok-cmd"
    failures = [e for e in events if e.get("event") == "command.failed"]
    assert failures and failures[0]["exit_status"] == 2


def test_timeout_defaults_to_the_jobs_max_runtime() -> None:
    @cronwarden.job(
        "slow-cmd", cron="0 * * * *", max_runtime="1s", retry=cronwarden.Retry(max_attempts=1)
    )
    def slow(ctx: cronwarden.RunContext) -> None:
        cronwarden.run_command("sleep 30", ctx, kill_grace=1)

    outcome = run_once(slow, "2026-01-20T02:00Z")
    assert outcome.kind is cronwarden.OutcomeKind.DEAD_LETTERED
    assert "timed out after 1s" in outcome.detail or "max runtime" in outcome.detail
