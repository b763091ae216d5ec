"""``DeadLetters.dlq_remove`` removes exactly the letters named (the migration drains the
source's queue with it once the destination has their windows), on SQLite and PostgreSQL;
the other brokers are covered by the switches of ``test_switch.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwarden.model.ports import Queue


def _two_letters(queue: Queue) -> list[str]:
    queue.publish(b'{"n": 1}', attributes={"n": "1"})
    queue.publish(b'{"n": 2}', attributes={"n": "2"})
    deliveries = queue.receive(2, visibility=30.0, wait=2.0)
    assert len(deliveries) == 2
    for delivery in deliveries:
        queue.dead_letter(delivery, "PermanentError", "the test's")
    letters = queue.dlq_peek(10)
    assert len(letters) == 2
    return [letter.message_id for letter in letters]


def _removes_only_the_named(queue: Queue) -> None:
    first, second = _two_letters(queue)
    assert queue.dlq_remove([]) == 0
    assert queue.dlq_remove([first, "no-such-letter"]) == 1
    assert [letter.message_id for letter in queue.dlq_peek(10)] == [second]
    assert queue.dlq_remove([first]) == 0  # gone already: nothing else removed
    assert queue.dlq_depth() == 1


def test_sqlite(tmp_path: Path) -> None:
    from cronwarden.adapters.local import LocalProvider

    provider = LocalProvider(str(tmp_path / "state.db"))
    try:
        _removes_only_the_named(provider.queue())
    finally:
        provider.close()


@pytest.mark.postgres
def test_postgres(postgres_dsn: str, postgres_schema: str) -> None:
    from cronwarden.adapters.postgres import PostgresProvider

    provider = PostgresProvider.from_env(
        {"CRONWARDEN_POSTGRES_DSN": postgres_dsn, "CRONWARDEN_POSTGRES_SCHEMA": postgres_schema}
    )
    try:
        _removes_only_the_named(provider.queue())
    finally:
        provider.close()
