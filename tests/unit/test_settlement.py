"""Settlement as a value: one outcome → one verdict, and the pull consumer's way to apply it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from cronwarden.adapters.local.queue import SQLiteQueue
from cronwarden.hosting import HostSettings
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import Delivery
from cronwarden.model.settlement import (
    MAX_POSTPONEMENTS,
    POSTPONED_ATTRIBUTE,
    Action,
    Verdict,
    capped,
    settle_on,
    verdict_for,
)
from cronwarden.run.engine import Outcome, OutcomeKind

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


class Topic:
    """Records what a host's verdict application publishes (fails on request)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.published: list[tuple[bytes, dict[str, str], float]] = []
        self.dead: list[tuple[str, str]] = []

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        if self.fail:
            raise ConnectionError("broker down")
        self.published.append((body, dict(attributes or {}), delay))

    def publish_dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        if self.fail:
            raise ConnectionError("broker down")
        self.dead.append((reason, description))


def test_the_push_host_answers_each_verdict_with_a_status() -> None:
    from cronwarden.adapters.gcp.push import ACK_STATUS, RETRY_STATUS, push_reply

    delivery = Delivery("m", b"run", {"job": "j"}, attempt=1)
    topic = Topic()
    assert push_reply(Verdict.ack(), delivery, topic).status == ACK_STATUS
    retry = push_reply(Verdict.retry(9.0), delivery, topic)
    assert (retry.status, retry.delay) == (RETRY_STATUS, 9.0)
    postponed = push_reply(Verdict.postpone(30.0, "deferred"), delivery, topic)
    assert postponed.status == ACK_STATUS  # a fresh copy carries it; this push is done
    assert topic.published == [(b"run", {"job": "j", POSTPONED_ATTRIBUTE: "1"}, 30.0)]
    dead = push_reply(Verdict.dead_letter("Broken", "why"), delivery, topic)
    assert (dead.status, dead.reason, topic.dead) == (ACK_STATUS, "Broken", [("Broken", "why")])
    down = Topic(fail=True)  # nothing is ever dropped: a failed publish is redelivered
    assert push_reply(Verdict.postpone(1.0), delivery, down).status == RETRY_STATUS
    assert push_reply(Verdict.dead_letter("Broken"), delivery, down).status == RETRY_STATUS


class Actions:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def complete(self, message: object) -> None:
        self.calls.append(("complete", message))

    def abandon(self, message: object) -> None:
        self.calls.append(("abandon", message))

    def deadletter(
        self,
        message: object,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        self.calls.append(("deadletter", (deadletter_reason, deadletter_error_description)))

    def renew_message_lock(self, message: object) -> None:
        self.calls.append(("renew", message))


class Bus(Topic):
    max_deliveries = 3

    def retry_copy(self, delivery: Delivery, delay: float) -> bool:
        return delivery.attempt < self.max_deliveries


def test_the_azure_host_applies_each_verdict_through_the_message_actions() -> None:
    from cronwarden.adapters.azure.functions import settle_with_actions

    bus, actions = Bus(), Actions()
    first = Delivery("m", b"run", {}, attempt=1, handle="msg-1")
    settle_with_actions(Verdict.postpone(5.0), first, bus, actions)  # type: ignore[arg-type]
    assert bus.published == [(b"run", {POSTPONED_ATTRIBUTE: "1"}, 5.0)]
    assert actions.calls == [("complete", "msg-1")]
    last = Delivery("m", b"run", {}, attempt=3, handle="msg-3")
    settle_with_actions(Verdict.retry(5.0), last, bus, actions)  # type: ignore[arg-type]
    assert actions.calls[-1] == ("deadletter", ("MaxDeliveryCountExceeded", "3 attempts (limit 3)"))
    down = Bus(fail=True)  # the postponed copy can not be sent: a counted retry instead
    settle_with_actions(Verdict.postpone(5.0), last, down, actions)  # type: ignore[arg-type]
    assert actions.calls[-1][0] == "deadletter"
