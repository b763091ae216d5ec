"""Parsing of human durations such as ``"90s"``, ``"15m"``, ``"1h30m"``, ``"2d"``."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from .errors import InvalidJobDefinition

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")

DurationLike = timedelta | int | float | str

#: the longest duration accepted (about ten years): longer is a typo (``"99999999999w"``), and
#: would overflow the datetime arithmetic done with it (deadlines, lease expiries, backoff)
MAX_DURATION = timedelta(days=3653)


def parse_duration(value: DurationLike, *, field: str = "duration") -> timedelta:
    """Return ``value`` as a timedelta.

    Numbers are seconds; strings are sequences of ``<number><unit>`` with units
    ms, s, m, h, d, w (``"1h30m"``). Raises :class:`InvalidJobDefinition` (a ``ValueError``)
    naming ``field`` for anything else, for NaN and infinities, and for a duration longer
    than :data:`MAX_DURATION` either way (negative values are the caller's to refuse).
    """
    if isinstance(value, bool):
        raise InvalidJobDefinition(f"{field}: expected a duration, got {value!r}")
    if isinstance(value, timedelta):
        return _bounded(value, value.total_seconds(), field)
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidJobDefinition(f"{field}: expected a finite duration, got {value!r}")
        return _bounded(value, value, field)
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        pos, total = 0, 0.0
        for match in _PART.finditer(text):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if text and pos == len(text):
            return _bounded(value, total, field)
        raise InvalidJobDefinition(
            f"{field}: cannot parse duration {value!r} (use e.g. '90s', '15m', '1h30m', '2d')"
        )
    raise InvalidJobDefinition(f"{field}: expected a duration, got {type(value).__name__}")


def _bounded(value: DurationLike, seconds: float, field: str) -> timedelta:
    """``seconds`` as a timedelta (``value`` itself when it is one), at most MAX_DURATION long."""
    if abs(seconds) > MAX_DURATION.total_seconds():
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
        raise InvalidJobDefinition(
            f"{field}: duration {shown} is longer than the limit of {MAX_DURATION.days} days"
        )
    return value if isinstance(value, timedelta) else timedelta(seconds=seconds)


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
