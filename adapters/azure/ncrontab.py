"""Translating 5-field cron (Vixie / Cloud Scheduler dialect) to Azure's 6-field NCRONTAB.

Two pure functions:

* :func:`to_ncrontab` translates the expression as is (same fields, same time zone), refusing what
  NCRONTAB would read differently. Vixie cron (and Cloud Scheduler, and cronwarden's own window
  computation) fires when *either* day-of-month or day-of-week matches if both are restricted;
  NCRONTAB requires *both*. A schedule restricting both is refused (split it into two jobs).
  ``L``, ``W``, ``#`` and ``?`` have no NCRONTAB equivalent and are refused too.
* :func:`utc_ncrontab` renders the schedule of a job declared in an IANA time zone as one
  NCRONTAB expression **in UTC** that fires at every UTC instant any local fire time can map to,
  across the zone's UTC offsets (e.g. ``0 2 * * *`` in Europe/Berlin fires at 00:00 and 01:00
  UTC). Azure timers are UTC unless ``WEBSITE_TIME_ZONE`` is set, which is app-wide and not
  available on every plan (DESIGN §4). The extra tick is harmless: the trigger floors every tick
  to the job's window in its own time zone, so the tick that does not match a window maps to
  the previous window, which already ran (a duplicate, acknowledged and logged).

Both raise :class:`~cronwarden.model.errors.InvalidJobDefinition` with one clear sentence.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronwarden.model.errors import InvalidJobDefinition

_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    )
}
_DAYS = {name: i for i, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}

#: (name, lowest, highest, names) of the five cron fields.
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_UNSUPPORTED = ("L", "W", "#", "?")


def _split(cron: str) -> list[str]:
    fields = cron.split()
    if len(fields) != 5:
        raise InvalidJobDefinition(
            f"cron {cron!r}: expected 5 fields (minute hour day month weekday), got {len(fields)}"
        )
    for text in fields:
        bare = text.upper()
        for name in (*_MONTHS, *_DAYS):
            bare = bare.replace(name, "")
        for token in _UNSUPPORTED:
            if token in bare:
                raise InvalidJobDefinition(
                    f"cron {cron!r}: {token!r} has no NCRONTAB / Cloud Scheduler equivalent; "
                    "use plain numbers, ranges, steps and lists"
                )
    return fields


def check_portable(cron: str) -> None:
    """Refuse what Cloud Scheduler's unix-cron and NCRONTAB lack (``L``, ``W``, ``#``, ``?``)."""
    _split(cron)


def _number(text: str, names: dict[str, int], cron: str, field: str) -> int:
    value = names.get(text.upper())
    if value is not None:
        return value
    if not text.isdigit():
        raise InvalidJobDefinition(f"cron {cron!r}: {text!r} is not a valid {field} value")
    return int(text)


def expand_field(text: str, index: int, cron: str = "") -> set[int]:
    """The values one cron field matches (``index`` 0..4: minute .. day-of-week).

    Day-of-week 7 is Sunday (0). Names (``JAN``, ``MON``) are accepted.
    """
    field, lo, hi, names = _FIELDS[index]
    cron = cron or text
    values: set[int] = set()
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = _number(step_text, {}, cron, field) if step_text else 1
        if step < 1:
            raise InvalidJobDefinition(f"cron {cron!r}: step {step_text!r} must be positive")
        if rng == "*":
            start, end = lo, hi if index != 4 else 6
        elif "-" in rng:
            a, _, b = rng.partition("-")
            start, end = _number(a, names, cron, field), _number(b, names, cron, field)
        else:
            start = _number(rng, names, cron, field)
            end = (hi if index != 4 else 6) if step_text else start
        if not (lo <= start <= hi and lo <= end <= hi) or start > end:
            raise InvalidJobDefinition(f"cron {cron!r}: {part!r} is out of range for {field}")
        values.update(range(start, end + 1, step))
    if index == 4 and 7 in values:
        values.discard(7)
        values.add(0)
    return values


def compress(values: Iterable[int], lo: int, hi: int) -> str:
    """A canonical field text for ``values``: ``*``, ``*/n``, ranges and lists (numbers only)."""
    items = sorted(set(values))
    if not items:
        raise ValueError("a cron field cannot be empty")
    if items == list(range(lo, hi + 1)):
        return "*"
    if len(items) >= 3:
        step = items[1] - items[0]
        progression = all(b - a == step for a, b in itertools.pairwise(items))
        if step > 1 and progression and items[0] == lo and items[-1] + step > hi:
            return f"*/{step}"
    parts: list[str] = []
    run = [items[0]]
    for value in items[1:]:
        if value == run[-1] + 1:
            run.append(value)
            continue
        parts.append(_run(run))
        run = [value]
    parts.append(_run(run))
    return ",".join(parts)


def _run(run: list[int]) -> str:
    if len(run) >= 3:
        return f"{run[0]}-{run[-1]}"
    return ",".join(str(v) for v in run)


def _restricted(text: str) -> bool:
    return text != "*"


def _check_day_semantics(cron: str, fields: list[str]) -> None:
    if _restricted(fields[2]) and _restricted(fields[4]):
        raise InvalidJobDefinition(
            f"cron {cron!r} restricts both day-of-month and day-of-week: cron fires when either "
            "matches, NCRONTAB only when both do; split it into two jobs (one per day field)"
        )


def to_ncrontab(cron: str) -> str:
    """``cron`` (5 fields) as a 6-field NCRONTAB expression firing at second 0.

    >>> to_ncrontab("*/15 * * * *")
    '0 */15 * * * *'
    >>> to_ncrontab("0 2 * * MON-FRI")
    '0 0 2 * * 1-5'
    """
    fields = _split(cron)
    _check_day_semantics(cron, fields)
    sets = [expand_field(text, i, cron) for i, text in enumerate(fields)]
    return _format(sets, fields)


def _format(sets: list[set[int]], original: list[str]) -> str:
    texts = []
    for i, values in enumerate(sets):
        _, lo, hi, _ = _FIELDS[i]
        if i == 4:
            hi = 6
        texts.append("*" if original[i] == "*" else compress(values, lo, hi))
    return "0 " + " ".join(texts)


def zone_offsets(timezone: str, start: datetime | None = None, years: int = 2) -> list[int]:
    """The distinct UTC offsets (minutes) of ``timezone`` from ``start`` (now) over ``years``."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidJobDefinition(f"timezone {timezone!r} is not a known IANA timezone") from exc
    when = (start or datetime.now(UTC)).astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    end = when + timedelta(days=366 * years)
    offsets: set[int] = set()
    while when < end:
        offset = when.astimezone(zone).utcoffset()
        assert offset is not None
        offsets.add(int(offset.total_seconds()) // 60)
        when += timedelta(hours=1)
    return sorted(offsets)


def utc_ncrontab(cron: str, timezone: str, *, start: datetime | None = None) -> str:
    """One NCRONTAB expression, in UTC, firing at every UTC instant a local fire time of
    ``cron`` in ``timezone`` maps to (under any of the zone's offsets in the next two years).

    Refused: what :func:`to_ncrontab` refuses, and schedules restricting the day of month or the
    month whose fire times cross midnight when moved to UTC (the shifted day would be a
    different calendar day: declare such a job in UTC).

    >>> utc_ncrontab("0 2 * * *", "Europe/Berlin")
    '0 0 0,1 * * *'
    """
    fields = _split(cron)
    _check_day_semantics(cron, fields)
    sets = [expand_field(text, i, cron) for i, text in enumerate(fields)]
    offsets = zone_offsets(timezone, start)
    if offsets == [0]:
        return _format(sets, fields)
    minutes: set[int] = set()
    hours: set[int] = set()
    deltas: set[int] = set()
    for hour in sets[1]:
        for minute in sets[0]:
            for offset in offsets:
                total = hour * 60 + minute - offset
                day, rest = divmod(total, 24 * 60)
                deltas.add(day)
                hours.add(rest // 60)
                minutes.add(rest % 60)
    out = [minutes, hours, sets[2], sets[3], sets[4]]
    texts = [
        compress(minutes, 0, 59),
        compress(hours, 0, 23),
        fields[2],
        fields[3],
        fields[4],
    ]
    if deltas != {0}:
        if _restricted(fields[2]) or _restricted(fields[3]):
            raise InvalidJobDefinition(
                f"cron {cron!r} in {timezone}: its fire times cross midnight in UTC, so the "
                "day of month / month would shift; Azure timers run in UTC: declare this job "
                "in UTC (or choose hours that stay on the same UTC day)"
            )
        if _restricted(fields[4]):
            out[4] = {(day + delta) % 7 for day in sets[4] for delta in deltas}
            texts[4] = compress(out[4], 0, 6)
    for i in (2, 3, 4):
        if texts[i] != "*":
            _, lo, hi, _ = _FIELDS[i]
            texts[i] = compress(out[i], lo, 6 if i == 4 else hi)
    return "0 " + " ".join(texts)


__all__ = [
    "check_portable",
    "compress",
    "expand_field",
    "to_ncrontab",
    "utc_ncrontab",
    "zone_offsets",
]
