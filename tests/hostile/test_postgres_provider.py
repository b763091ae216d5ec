"""The PostgreSQL provider (its store and its queue), where the stranded window was found: a
command job whose output has a NUL byte, and a job whose error names a file that is not UTF-8,
were started again on every redelivery (5 starts of a job declared with ``max_attempts=2``),
never dead-lettered, never alerted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cronwarden.adapters.postgres import PostgresQueue, PostgresSettings, PostgresStore
from cronwarden.jobs.command import run_command

from .hostile import ATTEMPTS, World, assert_dead_lettered

pytestmark = pytest.mark.postgres


@pytest.fixture
def settings(postgres_dsn: str, postgres_schema: str) -> PostgresSettings:
    return PostgresSettings(dsn=postgres_dsn, schema=postgres_schema, max_deliveries=5)


@pytest.fixture
def provider_store(settings: PostgresSettings) -> Iterator[PostgresStore]:
    store = PostgresStore(settings)
    try:
        yield store
    finally:
        store.close()


def _world(store: PostgresStore, settings: PostgresSettings, tmp_path: Path, handler: Any) -> World:
    return World(store, tmp_path, handler, queue=PostgresQueue(settings))


def test_a_command_printing_a_nul_byte_is_dead_lettered_after_its_attempts(
    provider_store: PostgresStore, settings: PostgresSettings, tmp_path: Path
) -> None:
    def handler(ctx: Any) -> None:
        run_command("printf 'rows: 3\\000\\377 done'; exit 2", ctx, timeout="30s")

    world = _world(provider_store, settings, tmp_path, handler)
    try:
        result = world.run()
        assert_dead_lettered(result, "MaxAttemptsExceeded", starts=ATTEMPTS)
        assert result.run is not None and "\\x00" in (result.run.error or "")
    finally:
        world.close()


def test_an_error_naming_a_non_utf8_file_is_dead_lettered_after_its_attempts(
    provider_store: PostgresStore, settings: PostgresSettings, tmp_path: Path
) -> None:
    import os

    name = os.fsdecode(b"export-\xff\xfe.csv")

    def handler(ctx: Any) -> None:
        raise FileNotFoundError(f"{name} vanished")

    world = _world(provider_store, settings, tmp_path, handler)
    try:
        result = world.run()
        assert_dead_lettered(result, "MaxAttemptsExceeded", starts=ATTEMPTS)
        assert result.run is not None and "export-\\udcff\\udcfe.csv" in (result.run.error or "")
    finally:
        world.close()


def test_a_ledger_key_naming_a_non_utf8_file_is_dead_lettered_at_once(
    provider_store: PostgresStore, settings: PostgresSettings, tmp_path: Path
) -> None:
    import os

    names = ["a.csv", os.fsdecode(b"b-\xff.csv"), "c.csv"]
    done: list[str] = []

    def handler(ctx: Any) -> None:
        for item in ctx.items(names, key=lambda value: value):
            done.append(item.key)

    world = _world(provider_store, settings, tmp_path, handler)
    try:
        result = world.run()
        assert_dead_lettered(result, "ContentRefused", starts=1)
        assert done == []  # refused when the batch was claimed: before any side effect
    finally:
        world.close()
