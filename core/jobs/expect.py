"""Expectations on a *successful* run: a job that exits cleanly having written nothing is
the failure three dashboards missed.

``Expect`` bounds ``items_done`` (``min_items`` / ``max_items``), any other counter the handler
reports (``counters={"rows_written": (1, None)}``: either end may be None; a counter the
handler never reported counts as 0) and the run's duration. :meth:`Expect.breaches` lists
what a finished run broke, as short human reasons (``"rows_written 0 < 1"``). A run that
breaks one still succeeds (its window is closed, not retried) and is recorded as
*suspicious*; the watcher raises ``suspicious`` until a later run meets them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..model.durations import DurationLike, format_duration, parse_duration
from ..model.errors import InvalidJobDefinition

ITEMS_DONE = "items_done"  #: the counter ``ctx.items`` raises per item done

Bounds = tuple[int | None, int | None]


def _bound(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidJobDefinition(f"expect.{where} must be a non-negative integer or None")
    return value


@dataclass(frozen=True)
class Expect:
    """What a successful run of the job must look like (all optional, checked at import)."""

    min_items: int | None = None
    max_items: int | None = None
    counters: Mapping[str, Bounds] = field(default_factory=dict)
    min_duration: DurationLike | None = None
    max_duration: DurationLike | None = None

    def __post_init__(self) -> None:
        bounds: dict[str, Bounds] = {}
        if not isinstance(self.counters, Mapping):
            raise InvalidJobDefinition("expect.counters must map counter names to (min, max)")
        for name, pair in self.counters.items():
            if not isinstance(name, str) or not name:
                raise InvalidJobDefinition("expect.counters: counter names are text")
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise InvalidJobDefinition(f"expect.counters[{name!r}] must be (min, max)")
            lo, hi = _bound(pair[0], f"counters[{name!r}] min"), _bound(pair[1], "max")
            bounds[name] = (lo, hi)
        items = (_bound(self.min_items, "min_items"), _bound(self.max_items, "max_items"))
        if items != (None, None):
            if ITEMS_DONE in bounds:
                raise InvalidJobDefinition(
                    f"expect: bound {ITEMS_DONE} with min_items/max_items or counters, not both"
                )
            bounds[ITEMS_DONE] = items
        for name, (lo, hi) in bounds.items():
            if lo is not None and hi is not None and lo > hi:
                raise InvalidJobDefinition(f"expect: {name} minimum {lo} exceeds maximum {hi}")
        object.__setattr__(self, "counters", bounds)
        durations: list[timedelta | None] = []
        for attr in ("min_duration", "max_duration"):
            raw = getattr(self, attr)
            value = None if raw is None else parse_duration(raw, field=f"expect.{attr}")
            if value is not None and value < timedelta(0):
                raise InvalidJobDefinition(f"expect.{attr} must not be negative")
            object.__setattr__(self, attr, value)
            durations.append(value)
        low, high = durations
        if low is not None and high is not None and low > high:
            raise InvalidJobDefinition("expect: min_duration exceeds max_duration")

    @property
    def empty(self) -> bool:
        return not self.counters and self.min_duration is None and self.max_duration is None

    def breaches(self, counters: Mapping[str, Any], duration_ms: int) -> list[str]:
        """What a run with ``counters`` that took ``duration_ms`` broke (empty: it met all)."""
        found: list[str] = []
        for name, (lo, hi) in self.counters.items():
            raw = counters.get(name, 0)
            value = raw if isinstance(raw, int) and not isinstance(raw, bool) else 0
            if lo is not None and value < lo:
                found.append(f"{name} {value} < {lo}")
            if hi is not None and value > hi:
                found.append(f"{name} {value} > {hi}")
        took = timedelta(milliseconds=duration_ms)
        low, high = self.min_duration, self.max_duration
        if isinstance(low, timedelta) and took < low:
            found.append(f"duration {_human(took)} < {_human(low)}")
        if isinstance(high, timedelta) and took > high:
            found.append(f"duration {_human(took)} > {_human(high)}")
        return found


def _human(delta: timedelta) -> str:
    if delta < timedelta(seconds=10):
        return f"{int(delta.total_seconds() * 1000)} ms"
    return format_duration(delta)


__all__ = ["ITEMS_DONE", "Expect"]
