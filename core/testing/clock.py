"""A clock a test sets and advances by hand."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from cronwarden.model.schedule import utc


def _as_utc(when: datetime | str) -> datetime:
    if isinstance(when, str):
        when = datetime.fromisoformat(when.replace("Z", "+00:00"))
    return utc(when)


class FakeClock:
    """A settable, thread-safe clock: ``clock()`` returns the current aware UTC datetime.

    Pass it wherever cronwarden takes a clock, e.g. ``EngineSettings(clock=FakeClock(...))``.
    Time moves only when the test calls :meth:`advance` or :meth:`set`. ``start`` may be an aware
    datetime or ISO text (``"2026-01-20T02:00Z"``); naive datetimes are refused (ambiguous).
    Without ``start`` the clock begins at the current time, to the second.
    """

    def __init__(self, start: datetime | str | None = None) -> None:
        self._now = (
            _as_utc(start) if start is not None else datetime.now(UTC).replace(microsecond=0)
        )
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def now(self) -> datetime:
        """The current fake time (the same as calling the clock)."""
        return self()

    def advance(self, delta: timedelta | float) -> datetime:
        """Move forward by ``delta`` (a timedelta or seconds) and return the new time."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        if step < timedelta(0):
            raise ValueError(f"a clock does not go backwards: advance({delta!r})")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: datetime | str) -> None:
        """Jump to ``when`` (either direction: a test may model a skewed worker)."""
        value = _as_utc(when)
        with self._lock:
            self._now = value

    def __repr__(self) -> str:
        return f"FakeClock({self().isoformat()!r})"
