"""Dead-letter reasons are the true first reason, whatever the broker answered before.

Found on the local provider: a handler's error with a lone surrogate made the SQLite queue's
dead-letter call raise, the message came back, and its letter said ``AlreadyDeadLettered``
instead of ``MaxAttemptsExceeded``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cronwarden.adapters.local import SQLiteQueue
from cronwarden.model.ports import Store
from cronwarden.model.settlement import Action

from .hostile import ATTEMPTS, NAMED, World, assert_dead_lettered


def test_a_hostile_error_is_dead_lettered_with_its_reason_on_the_first_call(
    store: Store, tmp_path: Path
) -> None:
    def handler(ctx: Any) -> None:
        raise OSError(f"cannot read {NAMED['lone_surrogate']}: \x00 {NAMED['rtl']}")

    world = World(store, tmp_path, handler)
    try:
        result = world.run()
        assert_dead_lettered(result, "MaxAttemptsExceeded", starts=ATTEMPTS)
        (letter,) = result.letters
        assert "\\udcff" in letter.description and "\\x00" in letter.description
        assert [o.reason for o in result.outcomes] == ["OSError", "MaxAttemptsExceeded"]
    finally:
        world.close()


def test_a_letter_sent_again_carries_the_first_reason_not_already_dead_lettered(
    store: Store, tmp_path: Path
) -> None:
    """The worker recorded the dead letter in the store, then its broker call was lost; the
    redelivery finds the run dead-lettered and sends the letter with the first reason."""

    def handler(ctx: Any) -> None:
        raise RuntimeError("upstream down")

    world = World(store, tmp_path, handler, attempts=1)
    try:
        world.trigger.publish(world.request())
        (delivery,) = world.queue.receive(1, visibility=60)
        decision = world.worker.decide(delivery)  # then the worker dies before settling
        assert decision.verdict.action is Action.DEAD_LETTER
        assert decision.verdict.reason == "MaxAttemptsExceeded"
        world.queue.retry(delivery, delay=0)  # the broker delivers the message again
        (again,) = world.queue.receive(1, visibility=60)
        outcome = world.worker.handle(again)
        assert outcome is not None and outcome.reason == "AlreadyDeadLettered"  # what it was
        assert outcome.dead_letter_reason == "MaxAttemptsExceeded"
        result = world.result([outcome])
        assert_dead_lettered(result, "MaxAttemptsExceeded", starts=1)
    finally:
        world.close()


def test_a_permanent_error_keeps_its_reason_when_sent_again(store: Store, tmp_path: Path) -> None:
    from cronwarden.model.errors import PermanentError

    def handler(ctx: Any) -> None:
        raise PermanentError("the input file is gone")

    world = World(store, tmp_path, handler, attempts=3)
    try:
        world.trigger.publish(world.request())
        (delivery,) = world.queue.receive(1, visibility=60)
        assert world.worker.decide(delivery).verdict.reason == "PermanentError"
        world.queue.retry(delivery, delay=0)
        (again,) = world.queue.receive(1, visibility=60)
        outcome = world.worker.handle(again)
        assert outcome is not None and outcome.dead_letter_reason == "PermanentError"
        assert_dead_lettered(world.result([outcome]), "PermanentError", starts=1)
    finally:
        world.close()


def test_the_sqlite_queue_keeps_the_first_reason_of_a_repeated_dead_letter_call(
    tmp_path: Path,
) -> None:
    queue = SQLiteQueue(str(tmp_path / "queue.db"), max_deliveries=5)
    try:
        queue.publish(b"{}", dedup_id="one")
        (delivery,) = queue.receive(1, visibility=60)
        queue.dead_letter(delivery, "MaxAttemptsExceeded", "2 attempt(s): \udcff\x00")
        queue.dead_letter(delivery, "AlreadyDeadLettered", "again")
        (letter,) = queue.dlq_peek(10)
        assert letter.reason == "MaxAttemptsExceeded"
        assert letter.description == "2 attempt(s): \\udcff\\x00"
        assert queue.dlq_depth() == 1
    finally:
        queue.close()
