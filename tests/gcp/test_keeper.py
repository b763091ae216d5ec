"""DeadlineKeeper on its own: extends in steps of at most the cap, stops at the target time,
on forget and on close."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from cronwarden.adapters.gcp._keeper import DeadlineKeeper


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], int]] = []
        self.lock = threading.Lock()

    def __call__(self, ack_ids: Sequence[str], seconds: int) -> None:
        with self.lock:
            self.calls.append((tuple(ack_ids), seconds))

    def count(self, ack_id: str) -> int:
        with self.lock:
            return sum(ack_id in ids for ids, _ in self.calls)


def wait_until(predicate, deadline: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_extends_until_the_target_then_stops() -> None:
    recorder = Recorder()
    keeper = DeadlineKeeper(recorder, cap=1.0)  # rounds every 1/3 s, whole seconds
    keeper.keep(["a"], 1.6)
    assert wait_until(lambda: keeper.pending() == 0, deadline=5)
    assert 2 <= recorder.count("a") <= 5
    assert all(1 <= seconds <= 1 for _, seconds in recorder.calls)
    done = recorder.count("a")
    time.sleep(0.5)  # nothing registered: nothing happens
    assert recorder.count("a") == done
    keeper.close()


def test_forget_and_close_stop_extending() -> None:
    recorder = Recorder()
    keeper = DeadlineKeeper(recorder, cap=1.0)
    keeper.keep(["a", "b"], 60)
    assert wait_until(lambda: recorder.count("b") >= 1)
    keeper.forget(["b"])
    seen_b = recorder.count("b")
    assert wait_until(lambda: recorder.count("a") >= 3)
    assert recorder.count("b") == seen_b
    keeper.close()
    after = recorder.count("a")
    time.sleep(0.5)
    assert recorder.count("a") == after
    keeper.keep(["c"], 60)  # closed: ignored
    assert keeper.pending() == 0
