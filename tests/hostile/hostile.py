"""Hostile data and a small world to run it through: one job on a real store, the local SQLite
queue as its broker (with a delivery limit far above the job's attempts, so that only the
protocol can stop a run in time), the trigger, the worker and the watcher."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

import cronwarden
from cronwarden import Condition, Engine, EngineSettings, JobSet, RunRequest, Trigger, Watcher
from cronwarden.adapters.local import SQLiteQueue
from cronwarden.hosting.trigger import Worker
from cronwarden.model.ports import DeadLetter, Queue, Store
from cronwarden.model.records import RunRecord, run_key_of
from cronwarden.model.runs import RunState, parse_window
from cronwarden.model.settlement import Outcome
from cronwarden.testing import FakeClock

WINDOW = "2026-01-20T10:00Z"
ATTEMPTS = 2
MIB = 1 << 20

#: named inputs of the measured matrix (docs in the report); the strategy mixes them freely
NAMED: dict[str, str] = {
    "nul": "out\x00put",
    "lone_surrogate": "report-\udcff\udc80.csv",  # os.fsdecode of b"report-\xff\x80.csv"
    "high_surrogate": "x\ud800y",
    "surrogate_pair": "\ud83d\ude00",  # two code points: what a JSON round trip would merge
    "mib": "m" * MIB,
    "rtl": "\u202eevil\u200f\u061cabc",
    "sql": "'; DROP TABLE records; -- \" OR 1=1",
    "json": '{"a": [1, "\\u0000", "\\"}]}\\',
    "emoji": "\U0001f4a5 é ß",
}

_PIECES = st.sampled_from(
    [
        "\x00",
        "\udcff",
        "\ud800",
        "\udfff",
        "\u202e",
        "\u200f",
        "'",
        '"',
        "\\",
        "\\u0000",
        "{",
        "}",
        "[",
        "]",
        "--",
        ";",
        "%s",
        "|",
        "/",
        "\n",
    ]
)
_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


@st.composite
def hostile_text(draw: st.DrawFn) -> str:
    """Text made of NUL, lone surrogates, RTL marks, SQL and JSON metacharacters and any
    other characters; now and then 1 MiB long."""
    parts = draw(
        st.lists(st.one_of(_PIECES, _SURROGATES, st.text(max_size=8)), min_size=1, max_size=12)
    )
    text = "".join(parts)
    if draw(st.integers(0, 9)) == 0:
        text = (text or "x") * (MIB // max(1, len(text)) + 1)
    return text


_names = itertools.count()


@dataclass
class Result:
    starts: int
    outcomes: list[Outcome]
    run: RunRecord | None
    letters: list[DeadLetter]
    waiting: bool  #: a message of the run is still in the queue (not dead-lettered)
    alerted: bool  #: the watcher's dead_letters condition is active for the job

    @property
    def state(self) -> RunState | None:
        return None if self.run is None else self.run.state


class World:
    """One fresh job named ``hostile-<n>`` whose handler is ``handler``, on ``store``, with
    ``queue`` as its broker (default: a fresh local SQLite queue)."""

    def __init__(
        self,
        store: Store,
        tmp_path: Path,
        handler: Callable[[Any], None],
        *,
        attempts: int = ATTEMPTS,
        queue: Queue | None = None,
    ) -> None:
        self.name = f"hostile-{next(_names)}"
        self.clock = FakeClock("2026-01-20T10:00:05Z")
        self.starts = 0

        def counted(ctx: Any) -> None:
            self.starts += 1
            handler(ctx)

        self.job = cronwarden.job(
            self.name,
            cron="*/15 * * * *",
            max_runtime="10m",
            retry=cronwarden.Retry(attempts, 0, 0),
        )(counted)
        self.jobs = JobSet([self.job])
        self.store = store
        self.queue = queue or SQLiteQueue(str(tmp_path / f"{self.name}.db"), max_deliveries=10)
        self.engine = Engine(self.jobs, store, EngineSettings(clock=self.clock))
        self.trigger = Trigger(self.jobs, self.queue, store)
        self.worker = Worker(self.engine, self.queue)
        self.watcher = Watcher(self.jobs, store, self.queue, notifiers=[], clock=self.clock)
        self.watcher.check()

    def request(self, payload: dict[str, Any] | None = None) -> RunRequest:
        return RunRequest(self.name, parse_window(WINDOW), payload=payload or {})

    def run(self, payload: dict[str, Any] | None = None, *, rounds: int = 12) -> Result:
        """Publish the window's run request and work the queue until it is empty (at most
        ``rounds`` deliveries: far more than the job's attempts)."""
        self.trigger.publish(self.request(payload))
        outcomes = []
        for _ in range(rounds):
            deliveries = self.queue.receive(1, visibility=self.worker.visibility)
            if not deliveries:
                break
            outcome = self.worker.handle(deliveries[0])
            if outcome is not None:
                outcomes.append(outcome)
        return self.result(outcomes)

    def result(self, outcomes: list[Outcome]) -> Result:
        stored = self.store.get(run_key_of(self.name, WINDOW))
        report = self.watcher.check()
        return Result(
            starts=self.starts,
            outcomes=outcomes,
            run=None if stored is None else RunRecord.from_data(stored.data),
            letters=self.queue.dlq_peek(10),
            waiting=self._waiting(),
            alerted=any(
                a.kind is Condition.DEAD_LETTERS and a.job == self.name for a in report.active
            ),
        )

    def _waiting(self) -> bool:
        """Whether a message of the run waits in the queue (the SQLite queue sees invisible
        ones too; another broker, the visible ones: its run record then shows the rest)."""
        if isinstance(self.queue, SQLiteQueue):
            return self.queue.holds(self.request().run_key)
        return bool(self.queue.receive(1, visibility=1.0))

    def close(self) -> None:
        self.queue.close()


def assert_dead_lettered(result: Result, reason: str, *, starts: int) -> None:
    """The run ended dead-lettered after ``starts`` handler starts, with one letter whose
    reason is ``reason`` (the run record's too), nothing left in the queue, and the watcher
    alerting."""
    assert result.starts == starts, result
    assert result.state is RunState.DEAD_LETTERED, result
    assert not result.waiting, result
    assert [letter.reason for letter in result.letters] == [reason], result
    assert result.run is not None and result.run.extra.get("dead_letter_reason") == reason
    assert result.alerted, result


def assert_succeeded(result: Result) -> None:
    assert result.starts == 1, result
    assert result.state is RunState.SUCCEEDED, result
    assert not result.waiting and not result.letters, result
