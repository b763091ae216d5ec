"""A ledger commit in flight when the store's emulator process group is frozen (SIGSTOP), on
Firestore and Table Storage: the client times out (outcome unknown), reads back while the
server is frozen (unavailable, retried), and once it is thawed (SIGCONT) the lease settles the
commit by its write id: the run succeeds, every item done exactly once, no lease lost."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest
from cronwarden.jobs import JobSet
from cronwarden.model.ports import Op, Store, Version
from cronwarden.run.engine import Engine, EngineSettings
from cronwarden.testing.faults import FaultyStore, marks
from tests.backends import _gcp_project
from tests.support.harness import at

W = at("2026-01-20T02:00Z")
HOLD = 3.0  #: seconds the emulator stays frozen, longer than the client's timeout


def _signal(pgids: Sequence[int], sig: int) -> None:
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


class FreezeMidCommit(FaultyStore):
    """Freezes ``pgids`` just before sending the first commit that marks items done and
    pending (the second batch), and thaws them ``HOLD`` seconds later."""

    def __init__(self, inner: Store, pgids: Sequence[int]) -> None:
        super().__init__(inner)
        self.pgids = list(pgids)
        self.frozen = threading.Event()
        self.thawer: threading.Timer | None = None

    def commit(self, ops: Sequence[Op]) -> list[Version]:
        if (
            not self.frozen.is_set()
            and marks("done")("commit", ops)
            and marks("pending")("commit", ops)
        ):
            self.frozen.set()
            _signal(self.pgids, signal.SIGSTOP)
            self.thawer = threading.Timer(HOLD, _signal, (self.pgids, signal.SIGCONT))
            self.thawer.start()
        return self.inner.commit(ops)

    def thaw(self) -> None:
        if self.thawer is not None:
            self.thawer.cancel()
        _signal(self.pgids, signal.SIGCONT)


@pytest.fixture(
    params=[
        pytest.param("firestore", marks=pytest.mark.gcp),
        pytest.param("table", marks=pytest.mark.azure),
    ]
)
def frozen_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FreezeMidCommit]:
    if request.param == "firestore":
        from cronwarden.adapters.gcp import FirestoreStore

        emulator = request.getfixturevalue("firestore_emulator")
        inner: Store = FirestoreStore(
            _gcp_project(request), emulator_host=emulator.address, commit_timeout=1.0
        )
        pgids = [emulator.pid]
    else:
        from cronwarden.adapters.azure import TableStore

        azurite = request.getfixturevalue("azurite")
        inner = TableStore.from_connection_string(
            azurite.connection_string,
            azurite.new_table(),
            read_timeout=1,
            connection_timeout=1,
            retry_total=0,
        )
        pgids = list(azurite.pids)
    store = FreezeMidCommit(inner, pgids)
    try:
        yield store
    finally:
        store.thaw()
        inner.close()


def test_commit_in_flight_on_a_frozen_emulator_is_settled_by_reading_back(
    frozen_store: FreezeMidCommit,
) -> None:
    effects: Counter[str] = Counter()
    leases: list[object] = []

    def fan(ctx: RunContext) -> None:
        leases.append(ctx._lease)
        for item in ctx.items([f"i{n}" for n in range(10)]):
            effects[item.key] += 1

    job = cronwarden.job("fan", cron="0 * * * *", max_runtime="5m")(fan)
    engine = Engine(JobSet([job]), frozen_store, EngineSettings(batch_size=5, store_retry_for=60.0))
    outcome = engine.execute(RunRequest("fan", W))
    assert frozen_store.frozen.is_set()
    assert outcome.kind is OutcomeKind.SUCCEEDED, outcome
    assert effects == Counter({f"i{n}": 1 for n in range(10)})
    lease = leases[0]
    # the client gave up on the frozen server at least once and the lease recovered
    assert lease.retried_unavailable + lease.resolved_unknown >= 1  # type: ignore[attr-defined]
