"""Whatever a handler raises or prints, and whatever keys it yields, the run ends in a state
the protocol defines within its declared attempts, on every store: dead-lettered with the true
reason (and alerted) or succeeded; never left running for the next delivery to start again.

Each case runs through the public API (``cronwarden.job``, ``Engine``, ``Trigger``, ``Worker``
on the local SQLite queue, ``Watcher``) on every store, once per named hostile input (the
measured matrix) and for a hypothesis strategy of hostile strings.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from cronwarden.jobs.command import run_command
from cronwarden.model.ports import Store
from cronwarden.model.records import PAGE_TAG
from cronwarden.model.text import unstorable
from cronwarden.run.ledger import MAX_ITEM_KEY_CHARS, item_records

from .hostile import ATTEMPTS, NAMED, World, assert_dead_lettered, assert_succeeded, hostile_text

# a handful of examples per store: each is a full run (several commits) on a real backend
EXAMPLES = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def error_case(store: Store, tmp_path: Path, text: str) -> None:
    def handler(ctx: Any) -> None:
        raise RuntimeError(text)

    world = World(store, tmp_path, handler)
    try:
        result = world.run()
        assert_dead_lettered(result, "MaxAttemptsExceeded", starts=ATTEMPTS)
        assert result.run is not None and result.run.error is not None
        assert not unstorable(result.run.error)
        assert result.run.error.startswith("RuntimeError")
    finally:
        world.close()


def output_case(store: Store, tmp_path: Path, text: str) -> None:
    output = tmp_path / f"output-{id(text)}.bin"
    output.write_bytes(text.encode("utf-8", "surrogatepass"))

    def handler(ctx: Any) -> None:
        run_command(f"cat {shlex.quote(str(output))}; exit 3", ctx, timeout="30s")

    world = World(store, tmp_path, handler)
    try:
        result = world.run()
        assert_dead_lettered(result, "MaxAttemptsExceeded", starts=ATTEMPTS)
        assert result.run is not None and result.run.error is not None
        assert "CommandFailed" in result.run.error and not unstorable(result.run.error)
    finally:
        world.close()


def key_case(store: Store, tmp_path: Path, text: str) -> None:
    def handler(ctx: Any) -> None:
        for item in ctx.items([text], key=lambda value: value):
            ctx.count("items", 1 if item.key == text else 0)

    world = World(store, tmp_path, handler)
    try:
        result = world.run()
        if not text or text.startswith(PAGE_TAG) or len(text) > MAX_ITEM_KEY_CHARS:
            assert_dead_lettered(result, "MaxAttemptsExceeded", starts=ATTEMPTS)  # ValueError
        elif unstorable(text):  # refused on every store alike, at once: retrying cannot help
            assert_dead_lettered(result, "ContentRefused", starts=1)
        else:
            assert_succeeded(result)
            assert result.run is not None and result.run.counters.get("items") == 1
            (item,) = item_records(store, world.name)
            assert item.data["key"] == text and item.data["state"] == "done"
    finally:
        world.close()


CASES = {"error": error_case, "output": output_case, "key": key_case}


@pytest.mark.parametrize("name", sorted(NAMED))
@pytest.mark.parametrize("case", sorted(CASES))
def test_named_hostile_input(store: Store, tmp_path: Path, case: str, name: str) -> None:
    CASES[case](store, tmp_path, NAMED[name])


@pytest.mark.parametrize("case", sorted(CASES))
@EXAMPLES
@given(text=hostile_text())
def test_any_hostile_input(store: Store, tmp_path: Path, case: str, text: str) -> None:
    CASES[case](store, tmp_path, text)
