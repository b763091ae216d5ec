"""Key layout and escaping: reversible, order- and prefix-preserving, Azure-legal."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwarden.adapters.azure import TableLimitError
from cronwarden.adapters.azure._keys import (
    escape,
    partition_key,
    row_key,
    split_row_key,
    successor,
    unescape,
)

FORBIDDEN = set("/\\#?") | {chr(c) for c in range(0x20)} | {chr(c) for c in range(0x7F, 0xA0)}
# Keys compare by code point here; Azure compares UTF-16 code units, which agree on the BMP.
texts = st.text(st.characters(max_codepoint=0xD7FF), max_size=40)


@settings(deadline=None)  # CPU shared with other suites: no timing
@given(texts)
def test_escape_round_trips_and_is_azure_legal(text: str) -> None:
    escaped = escape(text)
    assert not FORBIDDEN & set(escaped)
    assert unescape(escaped) == text


@settings(deadline=None)  # CPU shared with other suites: no timing
@given(texts, texts)
def test_escape_preserves_order(a: str, b: str) -> None:
    assert (a < b) == (escape(a) < escape(b))


@settings(deadline=None)  # CPU shared with other suites: no timing
@given(texts, texts)
def test_escape_preserves_prefixes(a: str, b: str) -> None:
    assert a.startswith(b) == escape(a).startswith(escape(b))
    low, row = "k:" + escape(b), "k:" + escape(a)
    assert (low <= row < successor(low)) == a.startswith(b)


def test_ordinary_ids_are_unchanged() -> None:
    assert escape("2026-01-20T02:00Z") == "2026-01-20T02:00Z"
    assert row_key("run", "2026-01-20T02:00Z") == "run:2026-01-20T02:00Z"
    assert partition_key("billing-sync") == "billing-sync"
    assert row_key("item", "w/a#b?c\\d") == 'item:w.1a"1b>1c[1d'
    assert split_row_key(row_key("item", "w/a#b?c\\d")) == ("item", "w/a#b?c\\d")


def test_unescape_rejects_text_escape_cannot_produce() -> None:
    for bad in (".", ".Z", "a/b", "\x01"):
        with pytest.raises(ValueError, match="not an escaped key"):
            unescape(bad)


def test_key_size_limit_is_enforced_after_escaping() -> None:
    row_key("item", "x" * 500)
    with pytest.raises(TableLimitError, match="1 KiB"):
        row_key("item", "/" * 300)  # 600 characters once escaped: over 1024 UTF-16 bytes
    with pytest.raises(TableLimitError, match="PartitionKey"):
        partition_key("j" * 513)


def test_kind_and_job_are_validated() -> None:
    with pytest.raises(TableLimitError, match="kind"):
        row_key("bad:kind", "x")
    with pytest.raises(TableLimitError, match="empty"):
        partition_key("")
