"""Record data ↔ entity properties: exact round trips and Azure's limits (no emulator)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwarden.adapters.azure import TableLimitError
from cronwarden.adapters.azure._entity import (
    MAX_PROPERTIES,
    build_entity,
    decode_entity,
    decode_name,
    encode_name,
)


def _round_trip(data: dict[str, Any]) -> dict[str, Any]:
    entity = build_entity("job", "run:x", data)
    return decode_entity(entity)


@settings(deadline=None)  # CPU shared with other suites: no timing
@given(st.text(max_size=20))  # 20 characters of 4 UTF-8 bytes stay under 255
def test_field_names_round_trip(name: str) -> None:
    prop = encode_name(name)
    assert decode_name(prop) == name
    assert prop not in {"PartitionKey", "RowKey", "Timestamp"}


def test_plain_field_names_are_kept() -> None:
    assert encode_name("consecutive_failures") == "consecutive_failures"
    assert encode_name("last-ok") == "_last_2dok"
    assert encode_name("Timestamp").startswith("_")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(deadline=None)  # CPU shared with other suites: no timing
@given(st.dictionaries(st.text(max_size=20), json_values, max_size=8))
def test_json_values_round_trip_exactly(data: dict[str, Any]) -> None:
    back = _round_trip(data)
    assert back == data
    # exact types too: ints stay ints, floats stay floats, bools stay bools
    assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in data.items()}


def test_edge_values_round_trip() -> None:
    data = {
        "big": 2**53 + 1,
        "huge": 2**70,
        "min": -(2**63),
        "f": 1.0,
        "nan_free": -0.0,
        "empty": "",
        "none": None,
        "t": True,
    }
    assert _round_trip(data) == data
    assert isinstance(_round_trip({"f": 1.0})["f"], float)


def test_aware_datetimes_round_trip_as_utc_and_naive_ones_are_refused() -> None:
    moment = datetime(2026, 3, 29, 2, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    back = _round_trip({"at": moment})["at"]
    assert back == moment and back.tzinfo == UTC and type(back) is datetime
    with pytest.raises(TypeError, match="naive"):
        build_entity("job", "run:x", {"at": datetime(2026, 1, 1)})


def test_non_json_values_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match="JSON"):
        build_entity("job", "run:x", {"raw": b"bytes"})
    with pytest.raises(TypeError, match="JSON"):
        build_entity("job", "run:x", {"nested": {"at": datetime.now(UTC)}})


def test_property_size_limit() -> None:
    build_entity("job", "run:x", {"s": "x" * 32 * 1024})  # 64 KiB in UTF-16: allowed
    with pytest.raises(TableLimitError, match="64 KiB"):
        build_entity("job", "run:x", {"s": "x" * (32 * 1024 + 1)})
    with pytest.raises(TableLimitError, match="64 KiB"):
        build_entity("job", "run:x", {"l": ["x" * 100] * 700})


def test_property_count_limit() -> None:
    build_entity("job", "run:x", {f"f{i}": i for i in range(MAX_PROPERTIES)})
    with pytest.raises(TableLimitError, match="252"):
        build_entity("job", "run:x", {f"f{i}": i for i in range(MAX_PROPERTIES + 1)})


def test_entity_size_limit() -> None:
    build_entity("job", "run:x", {f"s{i}": "x" * 32_000 for i in range(16)})
    with pytest.raises(TableLimitError, match="1 MiB"):
        build_entity("job", "run:x", {f"s{i}": "x" * 32_000 for i in range(17)})


def test_long_field_names_are_refused() -> None:
    with pytest.raises(TableLimitError, match="255"):
        build_entity("job", "run:x", {"n" * 256: 1})
