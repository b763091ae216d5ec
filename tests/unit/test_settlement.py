"""Settlement as a value: one outcome → one verdict, and the pull consumer's way to apply it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwarden.adapters.local.queue import SQLiteQueue
from cronwarden.engine import Outcome, OutcomeKind
from cronwarden.errors import ConfigurationError
from cronwarden.hosting import HostSettings
from cronwarden.ports import Delivery
from cronwarden.settlement import (
    MAX_POSTPONEMENTS,
    POSTPONED_ATTRIBUTE,
    Action,
    Verdict,
    capped,
    settle_on,
    verdict_for,
)

EXPECTED = {
    OutcomeKind.SUCCEEDED: Action.ACK,
    OutcomeKind.DUPLICATE: Action.ACK,
    OutcomeKind.SKIPPED: Action.ACK,
    OutcomeKind.OVERLAP_FAILED: Action.ACK,
    OutcomeKind.IN_PROGRESS: Action.POSTPONE,
    OutcomeKind.DEFERRED: Action.POSTPONE,
    OutcomeKind.FAILED: Action.RETRY,
    OutcomeKind.LEASE_LOST: Action.RETRY,
    OutcomeKind.DEAD_LETTERED: Action.DEAD_LETTER,
    OutcomeKind.REJECTED: Action.DEAD_LETTER,
}


@pytest.mark.parametrize("kind", list(OutcomeKind))
def test_every_outcome_has_one_verdict(kind: OutcomeKind) -> None:
    outcome = Outcome(kind, "job@w", delay=7.0, reason="Why", detail="what")
    verdict = verdict_for(outcome)
    assert verdict.action is EXPECTED[kind]
    if verdict.action in (Action.RETRY, Action.POSTPONE):
        assert verdict.delay == 7.0
    if verdict.action is Action.DEAD_LETTER:
        assert (verdict.reason, verdict.detail) == ("Why", "what")


def test_a_push_host_retries_an_in_progress_run_at_once() -> None:
    verdict = verdict_for(
        Outcome(OutcomeKind.IN_PROGRESS, "k", delay=30.0), in_progress_retries=True
    )
    assert verdict == Verdict.retry(0.0, "in_progress")
    deferred = verdict_for(Outcome(OutcomeKind.DEFERRED, "k", delay=30.0), in_progress_retries=True)
    assert deferred.action is Action.POSTPONE


def test_postponing_is_capped_then_counted_by_the_broker() -> None:
    postpone = Verdict.postpone(5.0, "deferred")
    fresh = Delivery("m", b"x", {}, attempt=1)
    worn = Delivery("m", b"x", {POSTPONED_ATTRIBUTE: str(MAX_POSTPONEMENTS)}, attempt=1)
    assert capped(postpone, fresh) is postpone
    assert capped(postpone, worn).action is Action.RETRY


def test_a_postponed_delivery_comes_back_as_a_fresh_message(tmp_path: Path) -> None:
    queue = SQLiteQueue(str(tmp_path / "q.db"))
    try:
        queue.publish(b"run", attributes={"job": "j"})
        (first,) = queue.receive(1, visibility=30, wait=1)
        settle_on(queue, first, Verdict.postpone(0.0, "deferred"))
        (again,) = queue.receive(1, visibility=30, wait=2)
        assert again.body == b"run" and again.attempt == 1  # no delivery attempt spent
        assert again.attributes == {"job": "j", POSTPONED_ATTRIBUTE: "1"}
        settle_on(queue, again, Verdict.dead_letter("Broken", "detail"))
        assert [(d.reason, d.description) for d in queue.dlq_peek()] == [("Broken", "detail")]
    finally:
        queue.close()


def test_host_settings_read_and_write_the_same_environment() -> None:
    env = {
        "CRONWARDEN_PROVIDER": "gcp",
        "CRONWARDEN_JOBS": "app.jobs",
        "CRONWARDEN_WEBHOOK_URL": "https://hooks.example.invalid/secret-token",
        "CRONWARDEN_FUNCTIONS": "worker,trigger",
    }
    settings = HostSettings.from_env(env)
    assert settings.functions == {"trigger", "worker"}
    assert HostSettings.from_env(settings.to_env()) == settings
    assert "secret-token" not in repr(settings)
    assert HostSettings.from_env({}) == HostSettings()
    with pytest.raises(ConfigurationError, match="CRONWARDEN_WEBHOOK_URL") as bad:
        HostSettings.from_env({"CRONWARDEN_WEBHOOK_URL": "ftp://secret-token"})
    assert "secret-token" not in str(bad.value)
    with pytest.raises(ConfigurationError, match="CRONWARDEN_FUNCTIONS"):
        HostSettings.from_env({"CRONWARDEN_FUNCTIONS": "cron"})
