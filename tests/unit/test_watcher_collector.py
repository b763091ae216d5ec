"""``Watcher.check`` pauses Python's cyclic collector only for its own duration: collection
runs again afterwards (also when the check fails), and a process that disabled it keeps it
disabled."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from cronwarden import JobSet, Watcher, job
from cronwarden.model.errors import StoreUnavailable
from cronwarden.model.ports import Record
from cronwarden.testing import MemoryStore

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class _Watching(MemoryStore):
    """Records whether the collector was enabled while the watcher's query ran."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.enabled_during: list[bool] = []

    def _query(self, *args: object) -> list[Record]:
        self.enabled_during.append(gc.isenabled())
        if self.fail:
            raise StoreUnavailable("down")
        return super()._query(*args)  # type: ignore[arg-type]


def _watcher(store: MemoryStore) -> Watcher:
    jobs = JobSet([job("a", cron="0 * * * *", max_runtime="1m")(lambda ctx: None)])
    return Watcher(jobs, store, notifiers=[], clock=lambda: NOW, hooks=[])


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.usefixtures("collector")
def test_paused_during_the_check_and_resumed_after() -> None:
    gc.enable()
    store = _Watching()
    _watcher(store).check()
    assert store.enabled_during == [False]
    assert gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_resumed_when_the_check_fails() -> None:
    gc.enable()
    store = _Watching(fail=True)
    with pytest.raises(StoreUnavailable):
        _watcher(store).check()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    store = _Watching()
    _watcher(store).check()
    assert store.enabled_during == [False]
    assert not gc.isenabled()
