"""The outbox on every store (SQLite, the emulators, PostgreSQL, memory): the transition and
its deliveries in one commit, claims by compare-and-set, and three watchers in turn deliver
each transition once per channel after the channel comes back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import JobSet, Watcher
from cronwarden.model.ports import Merge, Store
from cronwarden.model.records import DELIVERIES, status_key_of
from cronwarden.testing import FakeClock
from cronwarden.watch.alerting.channels import SlackWebhook
from cronwarden.watch.alerting.routing import Route, Router
from cronwarden.watch.outbox import DeliveryPolicy
from tests.backends import MARKS, STORES

from .conftest import Sink


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in STORES])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with STORES[request.param](request, tmp_path) as made:
        yield made


def test_three_watchers_deliver_each_transition_once_after_the_channel_returns(
    store: Store, sink: Sink
) -> None:
    clock = FakeClock("2026-01-20T10:00:30Z")
    jobs = JobSet(
        [
            cronwarden.job(name, cron="0 * * * *", max_runtime="10m")(lambda ctx: None)
            for name in ("billing", "reports")
        ]
    )
    policy = DeliveryPolicy(backoff=timedelta(seconds=30), max_backoff=timedelta(minutes=2))
    ws = [
        Watcher(
            jobs,
            store,
            None,
            notifiers=[Router([Route.of(SlackWebhook("chat", sink.url("/chat")))])],
            clock=clock,
            hooks=[],
            delivery=policy,
        )
        for _ in range(3)
    ]
    ws[0].check()
    clock.set("2026-01-20T13:00:30Z")
    sink.code = 500
    for turn in range(6):
        if turn == 2:
            store.commit([Merge(status_key_of("billing"), {"consecutive_failures": 5})])
        ws[turn % 3].check()
        clock.advance(timedelta(minutes=1))
    assert sink.received == []
    record = store.get(status_key_of("billing"))
    assert record is not None and len(record.data[DELIVERIES]) == 2  # missed, failing
    sink.code = 200
    for turn in range(6):
        ws[turn % 3].check()
        clock.advance(timedelta(minutes=1))
    bodies: list[dict[str, Any]] = sink.at("/chat")
    seen = sorted((b["alert"]["job"], b["alert"]["alert"]) for b in bodies)
    assert seen == [("billing", "failing"), ("billing", "missed"), ("reports", "missed")]
    assert len({b["alert"]["delivery_id"] for b in bodies}) == 3
    for name in ("billing", "reports"):
        record = store.get(status_key_of(name))
        assert record is not None and not record.data.get(DELIVERIES)
