"""What a store cannot hold is refused as ``ContentRefused`` (nothing applied), and a run
whose claim, checkpoint or result the store refuses for its content is dead-lettered at once
with the reason ``ContentRefused``: never retried, never left running.

The engine makes text it did not write storable, and the ledger refuses unstorable keys, so
these reach a store only through what a handler puts there itself: counter names, checkpoints,
the request's payload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from cronwarden.model.errors import ContentRefused
from cronwarden.model.ports import STATUS, Create, Key, Store
from cronwarden.model.text import has_surrogate

from .hostile import NAMED, World, assert_dead_lettered, assert_succeeded, hostile_text
from .test_hostile_runs import EXAMPLES

_jobs = iter(range(10**9))
_SURROGATES = {"lone_surrogate", "high_surrogate", "surrogate_pair"}
#: the named inputs each store refuses as a value (measured; a lone surrogate has no UTF-8,
#: PostgreSQL's jsonb cannot hold NUL)
REFUSED: dict[str, set[str]] = {
    "memory": set(_SURROGATES),
    "sqlite": set(_SURROGATES),
    "postgres": {"nul", *_SURROGATES},
    "firestore": {"mib", *_SURROGATES},
    "table": {"mib", *_SURROGATES},
    "dynamodb": {"mib", *_SURROGATES},
    "redis": set(_SURROGATES),  # binary-safe strings: NUL and 1 MiB are held
    # one JSON object per job (32 MiB): NUL and 1 MiB are held
    "s3": set(_SURROGATES),
    "blob": set(_SURROGATES),
    "gcs": set(_SURROGATES),
}


def backend(request: pytest.FixtureRequest) -> str:
    return str(request.node.callspec.params["store"])


@EXAMPLES
@given(text=hostile_text())
def test_a_store_holds_hostile_text_exactly_or_refuses_it(
    request: pytest.FixtureRequest, store: Store, text: str
) -> None:
    key = Key(STATUS, f"refusal-{next(_jobs)}")
    data = {"value": text, "list": [text, 1], "map": {"inner": text}}
    try:
        store.commit([Create(key, data)])
    except ContentRefused:
        assert store.get(key) is None  # nothing applied
        return
    stored = store.get(key)
    assert stored is not None and stored.data == data  # never silently changed
    assert not has_surrogate(text)  # no UTF-8 for a lone surrogate: refused on every store


@pytest.mark.parametrize("name", sorted(NAMED))
def test_a_counter_name_the_store_refuses_dead_letters_the_run_at_once(
    request: pytest.FixtureRequest, store: Store, tmp_path: Path, name: str
) -> None:
    text = NAMED[name]

    def handler(ctx: Any) -> None:
        ctx.count(text)

    world = World(store, tmp_path, handler)
    try:
        result = world.run()
        if name in REFUSED[backend(request)]:  # the completion commit was refused
            assert_dead_lettered(result, "ContentRefused", starts=1)
            assert result.run is not None and result.run.counters == {}
        else:
            assert_succeeded(result)
            assert result.run is not None and result.run.counters[text] == 1
    finally:
        world.close()


@pytest.mark.parametrize("name", sorted(NAMED))
def test_a_checkpoint_the_store_refuses_dead_letters_the_run_at_once(
    request: pytest.FixtureRequest, store: Store, tmp_path: Path, name: str
) -> None:
    text = NAMED[name]

    def handler(ctx: Any) -> None:
        ctx.save_checkpoint({"at": text})

    world = World(store, tmp_path, handler)
    try:
        result = world.run()
        if name == "mib":  # over the checkpoint limit: a ValueError of the handler's own
            assert_dead_lettered(result, "MaxAttemptsExceeded", starts=2)
        elif name == "surrogate_pair":  # a checkpoint is JSON: the pair is one character
            assert_succeeded(result)
            assert result.run is not None and result.run.checkpoint == {"at": "\U0001f600"}
        elif name in REFUSED[backend(request)]:  # the fenced write in the handler was refused
            assert_dead_lettered(result, "ContentRefused", starts=1)
        else:
            assert_succeeded(result)
            assert result.run is not None and result.run.checkpoint == {"at": text}
    finally:
        world.close()


@pytest.mark.parametrize("name", sorted(NAMED))
def test_a_payload_the_store_refuses_is_dead_lettered_without_running(
    request: pytest.FixtureRequest, store: Store, tmp_path: Path, name: str
) -> None:
    text = NAMED[name]
    world = World(store, tmp_path, lambda ctx: None)
    try:
        result = world.run(payload={"text": text})
        refused = name in REFUSED[backend(request)]
        if name == "mib":  # over the request size limit: never parsed, never run
            reason = "MalformedRequest"
        elif name == "surrogate_pair":  # a run request is JSON: the pair is one character
            assert_succeeded(result)
            assert result.run is not None and result.run.payload == {"text": "\U0001f600"}
            return
        elif refused:  # the claim itself was refused: nothing ran, one letter says why
            reason = "ContentRefused"
        else:
            assert_succeeded(result)
            assert result.run is not None and result.run.payload == {"text": text}
            return
        assert result.starts == 0 and result.run is None and not result.waiting, result
        assert [letter.reason for letter in result.letters] == [reason]
    finally:
        world.close()
