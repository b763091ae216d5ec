"""DynamoDB attribute values decode to exactly the data value that was encoded (the fast
paths of :func:`cronwarden.adapters.aws.store.decode` included), and damaged text raises."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwarden.adapters.aws.store import decode, encode

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_decode_inverts_encode(value: Any) -> None:
    assert decode(encode(value)) == value


@pytest.mark.parametrize(
    "text", ['"a"b"', '"a\\"', "nul", '{"a":1}{"b":2}', '"unterminated', "[1,"]
)
def test_damaged_text_raises(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        decode({"S": text})


@pytest.mark.parametrize(
    ("text", "value"),
    [('""', ""), ('"tab\\tquote\\""', 'tab\tquote"'), ("null", None), ("false", False), ("[]", [])],
)
def test_edge_values(text: str, value: Any) -> None:
    assert decode({"S": text}) == value
