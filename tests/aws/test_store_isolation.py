"""DynamoDB transactions are isolated on the local emulator too: refused transactions running
alongside successful ones never revert them (moto alone restores a whole-table copy when a
transaction fails; the launcher serialises its DynamoDB backend, see
``cronwarden.emulators.aws.server``)."""

from __future__ import annotations

import threading

import pytest

from cronwarden.adapters.aws import DynamoStore
from cronwarden.emulators.aws import MotoServer
from cronwarden.errors import CommitConflict
from cronwarden.ports import ITEM, STATUS, Create, Key, Merge

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
