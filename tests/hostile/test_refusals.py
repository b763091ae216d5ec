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
from cronwarden.model.runs import RunState
from cronwarden.model.text import unstorable

from .hostile import NAMED, World, assert_dead_lettered, assert_succeeded, hostile_text
from .test_hostile_runs import EXAMPLES

_jobs = iter(range(10**9))


@EXAMPLES
@given(text=hostile_text())
def test_a_store_holds_hostile_text_exactly_or_refuses_it(store: Store, text: str) -> None:
    key = Key(STATUS, f"refusal-{next(_jobs)}")
    data = {"value": text, "list": [text, 1], "map": {"inner": text}}
    try:
        store.commit([Create(key, data)])
    except ContentRefused as exc:
        assert str(exc)
        assert store.get(key) is None  # nothing applied
        return
    stored = store.get(key)
    assert stored is not None and stored.data == data


HOSTILE_NAMES = ["nul", "lone_surrogate", "high_surrogate", "rtl", "sql", "json"]


def _ended_in_time(result: Any, text: str, store: Store) -> None:
    """Stored exactly (succeeded) or refused at once (dead-lettered, ContentRefused)."""
    if result.state is RunState.SUCCEEDED:
        assert_succeeded(result)
    else:
        assert_dead_lettered(result, "ContentRefused", starts=1)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_counter_name_the_store_refuses_dead_letters_the_run(
    store: Store, tmp_path: Path, name: str
) -> None:
    text = NAMED[name]

    def handler(ctx: Any) -> None:
        ctx.count(text)

    world = World(store, tmp_path, handler)
    try:
        result = world.run()
        _ended_in_time(result, text, store)
        if result.state is RunState.SUCCEEDED:
            assert result.run is not None and result.run.counters[text] == 1
        if store.__class__.__name__ == "PostgresStore" and unstorable(text) or name == "nul":
            if store.__class__.__name__ == "PostgresStore":
                assert result.state is RunState.DEAD_LETTERED
    finally:
        world.close()


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_checkpoint_the_store_refuses_dead_letters_the_run(
    store: Store, tmp_path: Path, name: str
) -> None:
    text = NAMED[name]

    def handler(ctx: Any) -> None:
        ctx.save_checkpoint({"at": text})

    world = World(store, tmp_path, handler)
    try:
        result = world.run()
        _ended_in_time(result, text, store)
        if store.__class__.__name__ == "PostgresStore" and name in ("nul",):
            assert result.state is RunState.DEAD_LETTERED
    finally:
        world.close()


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_payload_the_store_refuses_is_dead_lettered_without_running(
    store: Store, tmp_path: Path, name: str
) -> None:
    text = NAMED[name]
    world = World(store, tmp_path, lambda ctx: None)
    try:
        result = world.run(payload={"text": text})
        if result.run is not None:
            assert_succeeded(result)
            assert result.run.payload == {"text": text}
        else:  # the claim itself was refused: nothing ran, one letter says why
            assert result.starts == 0 and not result.waiting
            assert [letter.reason for letter in result.letters] == ["ContentRefused"]
            assert [o.reason for o in result.outcomes] == ["ContentRefused"]
    finally:
        world.close()
