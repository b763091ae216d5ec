"""``cronwarden.model.text.storable``: what the engine does to text it did not write."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cronwarden.model.text import has_surrogate, storable, unstorable

from .hostile import hostile_text


@settings(max_examples=40, deadline=None)
@given(text=hostile_text(), limit=st.integers(8, 4096))
@example(text="\x00\x00", limit=8)  # escaped to exactly the limit, and not cut
def test_storable_text_encodes_within_its_limit(text: str, limit: int) -> None:
    made = storable(text, limit)
    assert not unstorable(made) and not has_surrogate(made)
    assert len(made.encode("utf-8")) <= limit
    if made != storable(text, 10**9):  # cut (not only escaped): it says so
        assert made.endswith("…")


@given(text=st.text().filter(lambda t: not unstorable(t)))
def test_storable_text_is_left_as_it_is(text: str) -> None:
    assert storable(text) == text
    assert storable(text, len(text.encode("utf-8"))) == text


def test_nul_and_lone_surrogates_are_escaped_visibly() -> None:
    assert storable("a\x00b\udcffc\ud83d\ude00") == "a\\x00b\\udcffc\\ud83d\\ude00"
    assert storable("ééé", 5) == "é…"  # never cut inside a character
