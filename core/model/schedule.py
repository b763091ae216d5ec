"""A 5-field cron schedule in an IANA timezone; windows are computed DST-correctly (cronsim).

Windows are the scheduled fire instants, returned as aware UTC datetimes. A local time skipped by
a DST jump fires once at the first valid instant after it; a repeated local time fires once (the
first occurrence), following cronsim's semantics (which match those of Debian cron / healthchecks).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .errors import InvalidJobDefinition

_ONE_SECOND = timedelta(seconds=1)


def utc(dt: datetime) -> datetime:
    """``dt`` as an aware UTC datetime; naive datetimes are refused (ambiguous)."""
    if dt.tzinfo is None:
        raise ValueError(f"naive datetime {dt.isoformat()} is ambiguous: pass an aware datetime")
    return dt.astimezone(UTC)


def parse_instant(text: str) -> datetime:
    """``text``, an ISO 8601 instant (``2026-01-20T02:00Z``, ``2026-01-20T03:00:00+01:00``), as
    an aware UTC datetime; one written without an offset reads as UTC (what the CLI and the
    dashboard promise). Raises ``ValueError`` naming ``text`` when it is not an instant, or
    when its UTC time falls outside the years 1..9999 (``0001-01-01T00:00+01:00``)."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO time like 2026-01-20T02:00Z") from None
    try:
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    except OverflowError:
        raise ValueError(f"{text!r} is out of range (years 1 to 9999 in UTC)") from None


@dataclass(frozen=True)
class Schedule:
    """``cron`` (minute hour day-of-month month day-of-week) evaluated in ``timezone``."""

    cron: str
    timezone: str = "UTC"
    _tz: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.cron, str):
            raise InvalidJobDefinition(f"cron must be text like '0 2 * * *', got {self.cron!r}")
        if not isinstance(self.timezone, str) or not self.timezone.strip():
            raise InvalidJobDefinition(
                f"timezone must be an IANA name like 'Europe/Berlin', got {self.timezone!r}"
            )
        fields = self.cron.split()
        if len(fields) != 5:
            raise InvalidJobDefinition(
                f"cron {self.cron!r}: expected 5 fields (minute hour day month weekday), "
                f"got {len(fields)}"
            )
        try:
            tz = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise InvalidJobDefinition(
                f"timezone {self.timezone!r} is not a known IANA timezone (e.g. 'Europe/Berlin')"
            ) from exc
        try:
            next(CronSim(self.cron, datetime(2000, 1, 1, tzinfo=tz)))
        except CronSimError as exc:
            raise InvalidJobDefinition(f"cron {self.cron!r}: {exc}") from exc
        except StopIteration as exc:  # e.g. "0 0 30 2 *": February 30th never comes
            raise InvalidJobDefinition(f"cron {self.cron!r} never fires") from exc
        object.__setattr__(self, "_tz", tz)

    @property
    def tz(self) -> ZoneInfo:
        return self._tz

    def next_after(self, when: datetime) -> datetime:
        """The first window strictly after ``when`` (UTC); ``ValueError`` when it would lie
        past the year 9999."""
        try:
            return _step(self.cron, self._tz, utc(when), False)
        except OverflowError:
            raise ValueError(f"no window of {self.cron!r} after {when}: out of range") from None

    def floor(self, when: datetime) -> datetime:
        """The latest window at or before ``when`` (UTC): maps any tick time to its window.
        ``ValueError`` at the edges of the calendar (years 1 and 9999) where it cannot be
        computed."""
        try:
            return _step(self.cron, self._tz, utc(when).replace(microsecond=0) + _ONE_SECOND, True)
        except OverflowError:
            raise ValueError(f"no window of {self.cron!r} at {when}: out of range") from None

    def windows(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Windows ``w`` with ``start <= w <= end``, oldest first. ``ValueError`` when ``start``
        is too close to the year 1 to look from (``0001-01-01T00:00Z``); the windows end with
        the year 9999."""
        end = utc(end)
        try:
            iterator = CronSim(self.cron, (utc(start) - _ONE_SECOND).astimezone(self._tz))
        except OverflowError:
            raise ValueError(f"windows from {start}: out of range") from None
        while True:
            try:
                window = utc(next(iterator))
            except (OverflowError, StopIteration):  # past the year 9999: no more windows
                return
            if window > end:
                return
            yield window

    def interval_at(self, when: datetime) -> timedelta:
        """The gap between the window at/before ``when`` and the next one."""
        window = self.floor(when)
        return self.next_after(window) - window

    def describe(self) -> str:
        try:
            text = str(CronSim(self.cron, datetime.now(self._tz)).explain())
        except Exception:  # explain() is best effort; the cron itself was validated
            text = self.cron
        return f"{text} ({self.timezone})"


@functools.lru_cache(maxsize=8192)
def _step(cron: str, tz: ZoneInfo, start: datetime, reverse: bool) -> datetime:
    """The next (or, reversed, the previous) window from ``start``. Cached: the watcher asks
    the same questions about ``now`` for every job, and fleets share a few schedules (parsing
    the expression costs more than the step)."""
    return utc(next(CronSim(cron, start.astimezone(tz), reverse=reverse)))
