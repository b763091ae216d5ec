"""Writes of unknown outcome on a run's own records (a :class:`~cronwarden.testing.FaultyStore`
fault that applies the write, then raises ``CommitOutcomeUnknown``: the reply was lost).

An ambiguous lease renewal whose store could not be read back before the renewal's retries
ended: the owner must not judge its own landed renewal a takeover. The next renewal reads the run
record back, adopts the write it finds there, and the run completes as the only attempt while a
second worker is told the window is in progress. An ambiguous claim is read back the same way."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import Engine, EngineSettings, JobSet, OutcomeKind, RunContext, RunRequest
from cronwarden.adapters.local import SQLiteStore
from cronwarden.model.ports import LOCK, RUN, Key, Op
from cronwarden.model.records import RunRecord
from cronwarden.model.runs import RunState
from cronwarden.testing import capture_events
from cronwarden.testing.faults import UNAVAILABLE, UNKNOWN, Fault, FaultyStore, touches
from tests.support.harness import at

W = at("2026-01-20T02:00Z")


class Renewals:
    """Watches the lease writes that carry nothing but the run and lock records (renewals),
    told apart by their write ids (a resend of one renewal carries the same id). The first
    renewal lands but its reply is lost; the store is unreadable from then until a second
    renewal is sent, so the first one's read-back never succeeds and its retries give up."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.unreadable = threading.Event()
        self.third = threading.Event()

    def observe(self, operation: str, ops: Sequence[Op]) -> bool:
        if self.is_renewal(operation, ops):
            write_id = ops[0].data.get("write_id")  # type: ignore[union-attr]
            if write_id not in self.ids:
                self.ids.append(write_id)
                if len(self.ids) == 1:
                    self.unreadable.set()
                else:
                    self.unreadable.clear()
                if len(self.ids) >= 3:
                    self.third.set()
        return False  # only watches

    @staticmethod
    def is_renewal(operation: str, ops: Sequence[Op]) -> bool:
        return operation == "commit" and len(ops) == 2 and ops[0].key.kind == RUN

    def first(self, operation: str, ops: Sequence[Op]) -> bool:
        return self.is_renewal(operation, ops) and len(self.ids) == 1

    def reads(self, operation: str, ops: Sequence[Op]) -> bool:
        return operation in ("get", "query") and self.unreadable.is_set()


def test_an_ambiguous_renewal_keeps_the_lease_and_the_run(tmp_path: Path) -> None:
    inner = SQLiteStore(str(tmp_path / "state.db"))
    renewals = Renewals()
    faulty = FaultyStore(
        inner,
        [
            Fault(UNKNOWN, match=renewals.observe, times=10**9),  # never fires: watches
            Fault(UNKNOWN, after=True, match=renewals.first),
            Fault(UNAVAILABLE, match=renewals.reads, times=10**9),
        ],
    )
    calls: list[str] = []
    second: list[OutcomeKind] = []

    def handler(ctx: RunContext) -> None:
        calls.append(ctx.run_key)
        deadline = threading.Event()
        timer = threading.Timer(20.0, deadline.set)
        timer.start()
        try:
            while not renewals.third.is_set() and not deadline.is_set():
                ctx.sleep(0.02)  # raises LeaseLost if the owner judged its lease lost
        finally:
            timer.cancel()
        # another worker, on the same state, gets the same window meanwhile
        second.append(other.execute(RunRequest("often", W)).kind)

    job = cronwarden.job("often", cron="0 * * * *", max_runtime="3s")(handler)
    settings = EngineSettings(
        lease_margin=timedelta(seconds=1), renew_fraction=0.1, store_retry_for=0.3
    )
    owner = Engine(JobSet([job]), faulty, settings, worker_id="owner")
    other = Engine(JobSet([job]), inner, settings, worker_id="other")
    try:
        with capture_events() as events:
            outcome = owner.execute(RunRequest("often", W))
        assert outcome.kind is OutcomeKind.SUCCEEDED, outcome
        assert renewals.third.is_set(), "the lease was renewed fewer than three times"
        assert ("commit", UNKNOWN, True) in faulty.injected  # the renewal landed, reply lost
        assert ("get", UNAVAILABLE, False) in faulty.injected  # and could not be read back
        assert second == [OutcomeKind.IN_PROGRESS]
        assert calls == ["often:2026-01-20T02:00Z"]
        record = inner.get(Key(RUN, "often", "2026-01-20T02:00Z"))
        assert record is not None
        run = RunRecord.from_data(record.data)
        assert run.state is RunState.SUCCEEDED and run.attempt == 1 and run.fence == 1
        resolved = [e for e in events if e["event"] == "store.unknown_resolved"]
        assert any(e.get("landed") for e in resolved), resolved
        assert not any(e["event"] == "lease.lost" for e in events)
    finally:
        inner.close()


@pytest.mark.parametrize("landed", [True, False], ids=["landed", "not-landed"])
def test_a_claim_whose_reply_was_lost_is_read_back(tmp_path: Path, landed: bool) -> None:
    """The claim's commit raises ``CommitOutcomeUnknown``: landed, the claim is adopted (the
    window runs now, as attempt 1, instead of waiting "in progress" behind its own lease until it
    expires); not landed, it is claimed again. Either way the run completes at once."""
    inner = SQLiteStore(str(tmp_path / "state.db"))
    faulty = FaultyStore(inner, [Fault(UNKNOWN, after=landed, match=touches(LOCK))])
    calls: list[str] = []
    job = cronwarden.job("often", cron="0 * * * *", max_runtime="5m")(
        lambda ctx: calls.append(ctx.run_key)
    )
    engine = Engine(JobSet([job]), faulty)
    try:
        with capture_events() as events:
            outcome = engine.execute(RunRequest("often", W))
        assert faulty.injected == [("commit", UNKNOWN, landed)]
        assert outcome.kind is OutcomeKind.SUCCEEDED, outcome
        assert calls == ["often:2026-01-20T02:00Z"]
        record = inner.get(Key(RUN, "often", "2026-01-20T02:00Z"))
        assert record is not None
        run = RunRecord.from_data(record.data)
        assert run.state is RunState.SUCCEEDED and run.attempt == 1 and run.fence == 1
        assert [e["event"] for e in events].count("run.started") == 1
    finally:
        inner.close()
