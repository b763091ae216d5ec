"""Property-based test of the claim/lease/fencing protocol (hypothesis state machine).

Several workers race on two run keys of one job, with a shared fake clock that jumps forward
(pauses, crashes, slow renewals). Invariants checked after every step:

* never two live owners of the job: a claim succeeds only after every other owner's lease ran
  out by the clock;
* fencing: for each run key, fences of accepted writes never go down, and a write is accepted
  only from the owner the store currently names;
* a finished run key is never claimed again (no double success);
* store failures on lease writes and completions (``FaultyStore``): a write the store did not
  apply (unavailable, or of unknown outcome and not landed) raises and leaves the stored run
  record as it was, the lease still held; one of unknown outcome that landed is settled by
  reading back its write id: it returns normally and the lease is kept.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import cronwarden
from cronwarden import Engine, EngineSettings, JobSet, RunRequest, RunState
from cronwarden.adapters.local import SQLiteStore
from cronwarden.model.errors import LeaseLost, StoreUnavailable
from cronwarden.model.ports import RUN, STATUS, Key, Merge
from cronwarden.run.claiming import Claim
from cronwarden.run.engine import Outcome
from cronwarden.testing.faults import UNAVAILABLE, UNKNOWN, Fault, FaultyStore
from tests.support.harness import FakeClock, at

WINDOWS = [at("2026-01-20T02:00Z"), at("2026-01-20T03:00Z")]
TTL = timedelta(seconds=10 + 2)  # max_runtime 10 s + margin 2 s
job = cronwarden.job("prop", cron="0 * * * *", max_runtime="10s")(lambda ctx: None)
#: what the next lease commit meets: nothing, refused unapplied, unknown (not applied / applied)
FAULTS = st.sampled_from([None, (UNAVAILABLE, False), (UNKNOWN, False), (UNKNOWN, True)])


class Protocol(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="cw-prop-")
        self.clock = FakeClock(at("2026-01-20T04:00Z"))
        self.store = SQLiteStore(f"{self.dir}/state.db")
        self.faulty = FaultyStore(self.store)
        self.engine = Engine(
            JobSet([job]),
            self.faulty,
            EngineSettings(lease_margin=timedelta(seconds=2), clock=self.clock),
        )
        self.held: dict[int, tuple[int, Claim]] = {}  # worker -> (window index, claim)
        self.granted: list[tuple[int, datetime]] = []  # (worker, lease expiry) of live claims
        self.fences: dict[int, int] = {0: 0, 1: 0}
        self.succeeded: set[int] = set()

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(worker=st.integers(0, 3), window=st.integers(0, 1))
    def claim(self, worker: int, window: int) -> None:
        if worker in self.held:
            return
        now = self.clock()
        result = self.engine.claim(job, RunRequest("prop", WINDOWS[window]), run_id=f"r{worker}")
        if isinstance(result, Outcome):
            return
        assert window not in self.succeeded, "a finished run key was claimed again"
        others = [exp for w, exp in self.granted if w != worker and exp > now]
        assert not others, f"claimed while another lease is live until {others}"
        result.lease.retry_for = 0.0  # a failed write raises at once (after any read-back)
        fence = result.run.fence
        assert fence > self.fences[window]
        self.fences[window] = fence
        self.held[worker] = (window, result)
        self.granted = [(w, e) for w, e in self.granted if w != worker]
        self.granted.append((worker, result.lease.expires_at()))

    def _arm(self, fault: tuple[str, bool] | None) -> None:
        self.faulty.plan = [] if fault is None else [Fault(fault[0], after=fault[1])]

    def _unapplied(self, window: int, claim: Claim, before: Any) -> None:
        """A write that raised a store failure left the run record as it was."""
        self.faulty.plan = []
        after = self.store.get(Key(RUN, "prop", claim.lease.run_key.id))
        assert after is not None and before is not None and after.version == before.version
        assert not claim.lease.lost

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), fault=FAULTS)
    def write(self, data: Any, fault: tuple[str, bool] | None) -> None:
        worker = data.draw(st.sampled_from(sorted(self.held)))
        window, claim = self.held[worker]
        current = self.store.get(Key(RUN, "prop", claim.lease.run_key.id))
        self._arm(fault)
        try:
            claim.lease.write(checkpoint={"progress": worker})
        except LeaseLost:
            del self.held[worker]
            return
        except StoreUnavailable:
            assert fault is not None and not fault[1], "a landed write was reported failed"
            self._unapplied(window, claim, current)
            return
        finally:
            self.faulty.plan = []
        assert current is not None and current.data["owner"] == claim.lease.run.owner
        assert claim.run.fence == self.fences[window], "a fenced-off owner wrote"
        stored = self.store.get(Key(RUN, "prop", claim.lease.run_key.id))
        assert stored is not None and stored.version == claim.lease.run_version
        assert stored.data["write_id"] == claim.lease.run.write_id  # this very write landed
        self.granted = [(w, e) for w, e in self.granted if w != worker]
        self.granted.append((worker, claim.lease.expires_at()))

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), succeed=st.booleans(), fault=FAULTS)
    def finish(self, data: Any, succeed: bool, fault: tuple[str, bool] | None) -> None:
        worker = data.draw(st.sampled_from(sorted(self.held)))
        window, claim = self.held.pop(worker)
        state = RunState.SUCCEEDED if succeed else RunState.FAILED
        current = self.store.get(Key(RUN, "prop", claim.lease.run_key.id))
        self._arm(fault)
        try:
            claim.lease.finish(
                claim.lease.run.with_(state=state),
                Merge(Key(STATUS, "prop"), {"status": state.value}),
            )
            ok = True
        except LeaseLost:
            ok = False
        except StoreUnavailable:
            assert fault is not None and not fault[1], "a landed completion was reported failed"
            self._unapplied(window, claim, current)
            self.held[worker] = (window, claim)  # still the owner: it may finish later
            return
        finally:
            self.faulty.plan = []
        if ok:
            assert claim.run.fence == self.fences[window]
            stored = self.store.get(Key(RUN, "prop", claim.lease.run_key.id))
            assert stored is not None and stored.data["state"] == state.value
            self.granted = [(w, e) for w, e in self.granted if w != worker]
            if succeed:
                self.succeeded.add(window)

    @rule(seconds=st.sampled_from([1, 3, 5, 11, 13, 30]))
    def advance(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @invariant()
    def one_record_per_key(self) -> None:
        if not hasattr(self, "store"):
            return
        runs = self.store.query(RUN, "prop")
        assert len({r.key.id for r in runs}) == len(runs)


Protocol.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestProtocol = Protocol.TestCase
