"""``parse_instant``: the one reading of an instant the CLI and the dashboard take."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwarden.model.schedule import parse_instant

WHEN = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-20T02:00Z",
        "2026-01-20T02:00z",
        "2026-01-20T02:00:00+00:00",
        "2026-01-20T03:00:00+01:00",
        "2026-01-19T21:00-05:00",
        "2026-01-20T02:00",  # no offset: UTC
        "2026-01-20 02:00:00",
        " 2026-01-20T02:00Z\n",
    ],
)
def test_every_iso_form_of_one_instant_reads_as_that_instant_in_utc(text: str) -> None:
    got = parse_instant(text)
    assert got == WHEN and got.tzinfo is UTC


@pytest.mark.parametrize("text", ["", "yesterday", "2026-01-20T25:00Z", "2026-13-01", "02:00"])
def test_text_that_is_no_instant_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="is not an ISO time") as refused:
        parse_instant(text)
    assert repr(text) in str(refused.value)
