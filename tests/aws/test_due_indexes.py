"""A table made before the watcher's due indexes: ``query_due`` still answers correctly (it
reads every status record, as before) and says so in an error log line at every check."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from cronwarden.adapters.aws import DynamoStore
from cronwarden.adapters.aws.store import INDEX, table_definition
from cronwarden.emulators.aws import MotoServer
from cronwarden.model.ports import STATUS, Key, Merge

pytestmark = [pytest.mark.aws]


def test_a_table_without_the_due_indexes_is_read_in_full_and_said(
    moto_server: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    settings = moto_server.settings(create_missing=False)
    older: dict[str, Any] = table_definition(settings.table)
    older["GlobalSecondaryIndexes"] = [
        g for g in older["GlobalSecondaryIndexes"] if g["IndexName"] == INDEX
    ]
    older["AttributeDefinitions"] = [
        a for a in older["AttributeDefinitions"] if a["AttributeType"] == "S"
    ]
    store = DynamoStore.from_settings(settings)
    store._db.create_table(**older)
    store.commit([Merge(Key(STATUS, "late"), {"watch_due": 5})])
    store.commit([Merge(Key(STATUS, "fine"), {"watch_due": 500})])
    with caplog.at_level(logging.ERROR):
        assert [r.key.job for r in store.query_due(10)] == ["late"]
    assert any(getattr(r, "event", "") == "store.missing_index" for r in caplog.records), (
        caplog.text
    )
