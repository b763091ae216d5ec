"""DynamoDB transactions are isolated on the local emulator too: refused transactions running
alongside successful ones never revert them (moto alone restores a whole-table copy when a
transaction fails; the launcher serialises its DynamoDB backend, see
``cronwarden.emulators.aws.server``)."""

from __future__ import annotations

import threading

import pytest

from cronwarden.adapters.aws import DynamoStore
from cronwarden.emulators.aws import MotoServer
from cronwarden.model.errors import CommitConflict
from cronwarden.model.ports import ITEM, STATUS, Create, Key, Merge

pytestmark = [pytest.mark.aws]


def test_refused_transactions_never_revert_concurrent_commits(moto_server: MotoServer) -> None:
    store = DynamoStore.from_settings(moto_server.settings())
    existing = Key(ITEM, "job", "taken")
    store.commit([Create(existing, {})])
    per_thread, threads_n = 25, 4
    errors: list[BaseException] = []

    def succeed(n: int) -> None:
        try:
            for i in range(per_thread):
                store.commit(
                    [
                        Merge(Key(STATUS, "job"), increments={"n": 1}),
                        Create(Key(ITEM, "job", f"ok/{n}/{i}"), {}),
                    ]
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def fail() -> None:
        for _ in range(per_thread):
            with pytest.raises(CommitConflict):
                store.commit(
                    [Merge(Key(STATUS, "job"), increments={"n": 1000}), Create(existing, {})]
                )

    threads = [threading.Thread(target=succeed, args=(n,)) for n in range(threads_n)]
    threads += [threading.Thread(target=fail) for _ in range(threads_n)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        status = store.get(Key(STATUS, "job"))
        assert status is not None and status.data["n"] == per_thread * threads_n
        assert len(store.query(ITEM, "job", prefix="ok/")) == per_thread * threads_n
    finally:
        store.delete_table()
        store.close()


def test_the_first_of_several_failing_ops_is_reported(moto_server: MotoServer) -> None:
    """The engine reads a refused fenced commit as a lost lease only when the run record (op 0)
    or the lock (op 1) failed: with later ops failing too, index 0 must be reported."""
    from cronwarden.model.ports import LOCK, RUN, Update

    store = DynamoStore.from_settings(moto_server.settings())
    try:
        run, lock = Key(RUN, "job", "w"), Key(LOCK, "job")
        (v_run,) = store.commit([Create(run, {})])
        (v_lock,) = store.commit([Create(lock, {})])
        items = [Key(ITEM, "job", f"w/{i}") for i in range(5)]
        v_items = store.commit([Create(k, {}) for k in items])
        store.commit([Update(run, {"owner": "b"}, v_run)])  # a takeover ...
        store.commit([Update(items[3], {"state": "pending"}, v_items[3])])  # ... redoing item 3
        stale = [Update(run, {}, v_run), Update(lock, {}, v_lock)]
        stale += [Update(k, {}, v) for k, v in zip(items, v_items, strict=True)]
        with pytest.raises(CommitConflict) as info:
            store.commit(stale)
        assert info.value.index == 0 and info.value.reason == "version"
    finally:
        store.delete_table()
        store.close()


def test_concurrent_maximums_are_retried_not_refused(moto_server: MotoServer) -> None:
    store = DynamoStore.from_settings(moto_server.settings())
    key = Key(STATUS, "job")
    errors: list[BaseException] = []

    def raise_to(values: list[int]) -> None:
        try:
            for value in values:
                store.commit([Merge(key, {"s": "ok"}, {"n": 1}, maximums={"best": value})])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=raise_to, args=(list(range(t, 60, 4)),)) for t in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        record = store.get(key)
        assert record is not None and record.data["best"] == 59 and record.data["n"] == 60
    finally:
        store.delete_table()
        store.close()
