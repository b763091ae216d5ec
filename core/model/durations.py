"""Parsing of human durations such as ``"90s"``, ``"15m"``, ``"1h30m"``, ``"2d"``."""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import InvalidJobDefinition

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")

DurationLike = timedelta | int | float | str


def parse_duration(value: DurationLike, *, field: str = "duration") -> timedelta:
    """Return ``value`` as a timedelta.

    Numbers are seconds; strings are sequences of ``<number><unit>`` with units
    ms, s, m, h, d, w (``"1h30m"``). Raises :class:`InvalidJobDefinition` naming ``field``.
    """
    if isinstance(value, bool):
        raise InvalidJobDefinition(f"{field}: expected a duration, got {value!r}")
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        pos, total = 0, 0.0
        for match in _PART.finditer(text):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if text and pos == len(text):
            return timedelta(seconds=total)
        raise InvalidJobDefinition(
            f"{field}: cannot parse duration {value!r} (use e.g. '90s', '15m', '1h30m', '2d')"
        )
    raise InvalidJobDefinition(f"{field}: expected a duration, got {type(value).__name__}")


def format_duration(delta: timedelta) -> str:
    """Short human form: ``1h30m``, ``45s``, ``2d3h``."""
    seconds = int(delta.total_seconds())
    if seconds <= 0:
        return f"{delta.total_seconds():.3g}s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            out.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(out)
