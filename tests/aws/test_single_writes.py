"""A commit of one Create / Update / Merge is one plain conditional write (``PutItem`` /
``UpdateItem``, half the write units of a transaction); several ops, or a Delete, stay one
``TransactWriteItems``. A plain write has no idempotency token, so botocore's resend of one
whose reply was lost must neither fail as a false conflict nor apply twice: these tests lose
real replies on the moto server (the request is sent and applied, the SDK is handed a 500
instead, and its standard retry resends it) and check what the store says and holds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronwarden.adapters.aws import DynamoStore
from cronwarden.emulators.aws import MotoServer
from cronwarden.model.errors import CommitConflict, CommitOutcomeUnknown
from cronwarden.model.ports import ITEM, RUN, STATUS, Create, Delete, Key, Merge, Update

pytestmark = [pytest.mark.aws]

_LOST = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"lost"}'
_THROTTLED = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}'
)
_BUSY = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException",'
    b'"message":"Transaction is ongoing for the item"}'
)


class _Body:
    """The raw body of a made-up reply (what ``AWSResponse`` reads)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


class _Reply:
    """A ``before-send`` hook for one operation: its first request gets a made-up reply.

    ``send_first``: the request is really sent (and applied) first, so the reply that was lost
    is a 500 after the write landed; otherwise it is refused unsent (``refusal``: throttled,
    or a transaction in flight). ``between`` runs after the real send, before botocore's resend
    (another writer)."""

    def __init__(
        self,
        *,
        send_first: bool,
        between: Callable[[], None] | None = None,
        refusal: bytes = _THROTTLED,
    ) -> None:
        self.send_first, self.between, self.refusal = send_first, between, refusal
        self.made_up = 0

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse
        from botocore.httpsession import URLLib3Session

        if self.made_up:
            return None  # botocore's resend goes to the server
        self.made_up += 1
        headers = {"Content-Type": "application/x-amz-json-1.0"}
        if not self.send_first:
            return AWSResponse(request.url, 400, headers, _Body(self.refusal))
        session = URLLib3Session()
        try:
            real = session.send(request)
            assert real.status_code == 200, real.content
        finally:
            session.close()
        if self.between is not None:
            self.between()
        return AWSResponse(request.url, 500, headers, _Body(_LOST))


@pytest.fixture
def store(moto_server: MotoServer) -> Iterator[DynamoStore]:
    store = DynamoStore.from_settings(moto_server.settings())
    try:
        yield store
    finally:
        store.delete_table()
        store.close()


def _calls(store: DynamoStore) -> list[str]:
    """The DynamoDB operations the store's client sends from now on (resends not included)."""
    names: list[str] = []
    store._db.meta.events.register(
        "before-call.dynamodb", lambda model, **_: names.append(model.name)
    )
    return names


def _lose_first_reply(store: DynamoStore, operation: str, reply: _Reply) -> _Reply:
    store._db.meta.events.register(f"before-send.dynamodb.{operation}", reply)
    return reply


def test_one_op_commits_are_plain_writes_and_the_rest_transactions(store: DynamoStore) -> None:
    calls = _calls(store)
    run, status = Key(RUN, "job", "w1"), Key(STATUS, "job")
    (v1,) = store.commit([Create(run, {"state": "running"})])
    (v2,) = store.commit([Update(run, {"state": "done"}, v1)])
    store.commit([Merge(status, {"last": "w1"}, {"duplicates": 1})])
    store.commit([Merge(status, maximums={"best": 3})])
    assert calls == ["PutItem", "PutItem", "UpdateItem", "GetItem", "UpdateItem"]
    del calls[:]
    store.commit([Create(Key(ITEM, "job", "w1/a"), {}), Merge(status, increments={"n": 1})])
    (done,) = store.commit([Create(Key(ITEM, "job", "w1/b"), {})])
    store.commit([Delete(Key(ITEM, "job", "w1/b"), done)])
    assert calls == ["TransactWriteItems", "PutItem", "TransactWriteItems"]
    record = store.get(status)
    assert record is not None
    assert record.data == {"last": "w1", "duplicates": 1, "best": 3, "n": 1}
    got = store.get(run)
    assert got is not None and got.version == v2 and got.data == {"state": "done"}


def test_refusals_of_plain_writes_are_conflicts_as_before(store: DynamoStore) -> None:
    run = Key(RUN, "job", "w1")
    (v1,) = store.commit([Create(run, {"state": "done"})])
    calls = _calls(store)
    with pytest.raises(CommitConflict) as exists:
        store.commit([Create(run, {"state": "running"})])
    # the refused claim brings the record it found: a duplicate is judged without a read
    assert exists.value.index == 0 and exists.value.reason == "exists"
    assert exists.value.found is not None and exists.value.found.version == v1
    assert exists.value.found.data == {"state": "done"}
    with pytest.raises(CommitConflict) as stale:
        store.commit([Update(run, {"state": "x"}, "not-the-version")])
    assert stale.value.reason == "version" and stale.value.found is None
    assert calls == ["PutItem", "PutItem"]
    got = store.get(run)
    assert got is not None and got.version == v1 and got.data == {"state": "done"}


@pytest.mark.parametrize("kind", ["create", "update"])
def test_a_resent_put_that_had_landed_is_a_success(store: DynamoStore, kind: str) -> None:
    run = Key(RUN, "job", "w1")
    ops: list[Any] = [Create(run, {"state": "running"})]
    if kind == "update":
        (v1,) = store.commit(ops)
        ops = [Update(run, {"state": "done"}, v1)]
    reply = _lose_first_reply(store, "PutItem", _Reply(send_first=True))
    (version,) = store.commit(ops)
    assert reply.made_up == 1  # the reply was lost and botocore resent the write
    got = store.get(run)
    assert got is not None and got.version == version
    assert got.data == dict(ops[0].data)


def test_a_resent_merge_that_had_landed_counts_once(store: DynamoStore) -> None:
    status = Key(STATUS, "job")
    store.commit([Merge(status, {"state": "ok"}, {"duplicates": 1})])
    reply = _lose_first_reply(store, "UpdateItem", _Reply(send_first=True))
    (version,) = store.commit([Merge(status, {"last": "w2"}, {"duplicates": 1})])
    assert reply.made_up == 1
    got = store.get(status)
    assert got is not None and got.version == version
    assert got.data == {"state": "ok", "last": "w2", "duplicates": 2}


def test_a_resent_maximum_that_had_landed_is_a_success(store: DynamoStore) -> None:
    status = Key(STATUS, "job")
    store.commit([Merge(status, {"state": "ok"}, maximums={"best": 1})])
    reply = _lose_first_reply(store, "UpdateItem", _Reply(send_first=True))
    (version,) = store.commit([Merge(status, increments={"n": 1}, maximums={"best": 5})])
    assert reply.made_up == 1
    got = store.get(status)
    assert got is not None and got.version == version
    assert got.data == {"state": "ok", "best": 5, "n": 1}


def test_a_resent_put_refused_after_another_write_is_an_unknown_outcome(
    store: DynamoStore, moto_server: MotoServer
) -> None:
    """The write landed, another writer replaced the record, then botocore's resend was
    refused: "nothing applied" would be false, so the outcome is unknown (read it back)."""
    run = Key(RUN, "job", "w1")
    (v1,) = store.commit([Create(run, {"state": "running"})])
    other = DynamoStore.from_settings(moto_server.settings(table=store.table))

    def takeover() -> None:
        found = other.get(run)
        assert found is not None and found.data == {"state": "done"}  # ours landed
        other.commit([Update(run, {"state": "taken"}, found.version)])

    reply = _lose_first_reply(store, "PutItem", _Reply(send_first=True, between=takeover))
    try:
        with pytest.raises(CommitOutcomeUnknown):
            store.commit([Update(run, {"state": "done"}, v1)])
    finally:
        other.close()
    assert reply.made_up == 1
    got = store.get(run)
    assert got is not None and got.data == {"state": "taken"}


def test_a_refusal_after_a_throttled_attempt_is_a_conflict(store: DynamoStore) -> None:
    """A throttled attempt was not applied: the resend's refusal is a plain conflict."""
    run = Key(RUN, "job", "w1")
    (v1,) = store.commit([Create(run, {"state": "done"})])
    reply = _lose_first_reply(store, "PutItem", _Reply(send_first=False))
    with pytest.raises(CommitConflict) as info:
        store.commit([Create(run, {"state": "running"})])
    assert reply.made_up == 1
    assert info.value.reason == "exists"
    assert info.value.found is not None and info.value.found.version == v1


def test_a_plain_write_refused_by_a_transaction_in_flight_is_sent_again(
    store: DynamoStore,
) -> None:
    """``TransactionConflictException`` (a transaction holds the item; botocore does not
    retry it) applied nothing: the commit is sent again, as a conflicted transaction is."""
    status = Key(STATUS, "job")
    calls = _calls(store)
    reply = _lose_first_reply(store, "UpdateItem", _Reply(send_first=False, refusal=_BUSY))
    (version,) = store.commit([Merge(status, {"state": "ok"}, {"duplicates": 1})])
    assert reply.made_up == 1 and calls == ["UpdateItem", "UpdateItem"]
    got = store.get(status)
    assert got is not None and got.version == version
    assert got.data == {"state": "ok", "duplicates": 1}


class _Script(_Reply):
    """Made-up replies for the first sends of one operation, in order: ``"lost"`` (sent and
    applied, then a 500), ``"busy"`` (refused unsent: a transaction in flight); later sends
    go to the server. ``between`` runs before the first send that goes through."""

    def __init__(self, steps: list[str], between: Callable[[], None]) -> None:
        super().__init__(send_first=True, refusal=_BUSY)
        self.steps, self.after = list(steps), between

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        if not self.steps:
            if self.after is not None:
                self.after, after = None, self.after
                after()
            return None
        step = self.steps.pop(0)
        if step == "lost":
            self.made_up = 0  # the parent sends it, then loses the reply
            reply = super().__call__(request)
        else:
            headers = {"Content-Type": "application/x-amz-json-1.0"}
            reply = AWSResponse(request.url, 400, headers, _Body(_BUSY))
        self.made_up = 1
        return reply


def test_a_lost_reply_is_remembered_across_the_stores_own_resends(
    store: DynamoStore, moto_server: MotoServer
) -> None:
    """The first send landed (reply lost), botocore's resend met a transaction in flight, the
    store sent the commit again after another writer had replaced the record: refused, and
    not ours, so the outcome is unknown, not a conflict (the first send's landing is kept in
    mind across the store's own resends)."""
    run = Key(RUN, "job", "w1")
    (v1,) = store.commit([Create(run, {"state": "running"})])
    other = DynamoStore.from_settings(moto_server.settings(table=store.table))

    def takeover() -> None:
        found = other.get(run)
        assert found is not None and found.data == {"state": "done"}  # ours landed
        other.commit([Update(run, {"state": "taken"}, found.version)])

    calls = _calls(store)
    script = _Script(["lost", "busy"], between=takeover)
    _lose_first_reply(store, "PutItem", script)
    try:
        with pytest.raises(CommitOutcomeUnknown):
            store.commit([Update(run, {"state": "done"}, v1)])
    finally:
        other.close()
    assert not script.steps and script.after is None  # every step ran
    assert calls == ["PutItem", "PutItem"]  # botocore's call, then the store's resend
    got = store.get(run)
    assert got is not None and got.data == {"state": "taken"}


@pytest.mark.parametrize("alone", [True, False])
def test_an_increment_of_a_null_field_counts_it_as_zero(store: DynamoStore, alone: bool) -> None:
    """``ADD`` refuses a field stored as null; the Merge contract counts null as 0: the
    increment is applied against a read, alone (a plain write) or in a transaction."""
    status = Key(STATUS, "job")
    store.commit([Create(status, {"duplicates": None, "state": "ok"})])
    calls = _calls(store)
    ops: list[Any] = [Merge(status, {"last": "w2"}, {"duplicates": 2})]
    if not alone:
        ops.append(Create(Key(ITEM, "job", "w2/a"), {}))
    (version, *_) = store.commit(ops)
    sent = "UpdateItem" if alone else "TransactWriteItems"
    assert calls == [sent, "GetItem", sent]  # refused, read, written against the read
    got = store.get(status)
    assert got is not None and got.version == version
    assert got.data == {"duplicates": 2, "state": "ok", "last": "w2"}
