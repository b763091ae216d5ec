"""Read a crontab the way Vixie cron (and cronie, Debian cron) reads it, and translate each line
into a cronwarden schedule exactly, or refuse it with one line.

The dialect, as implemented by Vixie cron 4.1 and kept by its descendants:

* blank lines and lines whose first non-blank character is ``#`` are comments;
* ``NAME = value`` lines set the environment of every entry *after* them (quotes around the value
  are removed); ``CRON_TZ`` (cronie) sets the timezone the following schedules are read in;
  ``SHELL`` the shell (default ``/bin/sh``); ``MAILTO`` who got the output;
* an entry is five fields (minute 0-59, hour 0-23, day of month 1-31, month 1-12 or ``jan``..,
  day of week 0-7 or ``sun``.., 0 and 7 both Sunday) or one of ``@yearly @annually @monthly
  @weekly @daily @midnight @hourly @reboot``; in a system crontab (``/etc/crontab``,
  ``/etc/cron.d/*``) a user name follows; the rest of the line is the command;
* a field is a list of ``*``, ``N`` or ``N-M``, each optionally followed by ``/step``;
* **day of month OR day of week**: when neither of the two fields starts with ``*``, a day
  matches if *either* matches (``0 0 1 * mon`` is the 1st of every month *and* every Monday);
  when one of them starts with ``*`` (``*/2`` included) both must match;
* in the command, an unescaped ``%`` ends the command; the text after it is the command's
  standard input, with every further unescaped ``%`` turned into a newline; ``\\%`` is ``%``.

cronwarden's :class:`~cronwarden.model.schedule.Schedule` evaluates cron with cronsim, which
implements
the same day-of-month/day-of-week rule (the "starts with ``*``" test of Vixie cron) and the same
ranges, steps, names and Sunday-as-7. What the two dialects read differently, or what
cronwarden cannot do, is refused: a single value with a step (``5/15``: Vixie cron 4.1 reads
5 and ignores the step, cronie refuses it, cronsim reads 5-59/15), a command starting with
``-`` (an option in Vixie cron 4), the non-Vixie extensions ``L``, ``W``, ``#`` and ``?``, backwards
ranges, ``@reboot`` (there is no boot in a serverless job) and unknown ``@`` words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import PurePath
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..model.errors import InvalidJobDefinition
from ..model.redaction import redact
from ..model.schedule import Schedule

__all__ = [
    "CronEntry",
    "Crontab",
    "EnvLine",
    "Flag",
    "is_system_crontab",
    "parse_crontab",
    "translate_fields",
]

NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    (
        "month",
        1,
        12,
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    ),
    ("day of week", 0, 7, ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]),
)
_ENV = re.compile(r"^\s*([^\s=]+)\s*=\s*(.*?)\s*$")
_ELEMENT = re.compile(r"^(?P<base>\*|(?P<lo>[0-9a-z]+)(?:-(?P<hi>[0-9a-z]+))?)(?:/(?P<step>\w*))?$")
#: Chained lines: a later line starting at most this long after an earlier one on the same days.
CHAIN_WINDOW_MINUTES = 120


@dataclass(frozen=True)
class Flag:
    """Something about a line a human must decide; ``code`` is stable, ``message`` one line."""

    code: str  #: reboot, percent, dom-or-dow, dom-and-dow, chained, secret-in-command
    message: str


@dataclass(frozen=True)
class EnvLine:
    lineno: int
    name: str
    value: str

    def shown(self) -> str:
        """``NAME=value`` with the value masked when the name or value marks a secret."""
        return redact(f"{self.name}={self.value}")

    @property
    def secret(self) -> bool:
        return self.shown() != f"{self.name}={self.value}"


@dataclass(frozen=True)
class CronEntry:
    """One schedule line of a crontab, read and (unless ``refusal``) translated."""

    lineno: int
    text: str  #: the line as written
    spec: str  #: the schedule as written: five fields or an ``@`` word
    command: str  #: what the shell runs: the text before the first unescaped ``%``
    stdin: str | None  #: the text after it, ``%`` turned into newlines; None without ``%``
    user: str | None  #: the user field of a system crontab
    env: tuple[EnvLine, ...]  #: the environment lines in effect for this line, in order
    cron: str | None = None  #: the translated 5-field expression
    timezone: str | None = None  #: CRON_TZ in effect, else the timezone passed in
    refusal: str | None = None  #: why this line cannot be translated (one line)
    flags: tuple[Flag, ...] = ()

    @property
    def schedule(self) -> Schedule | None:
        if self.cron is None or self.timezone is None or self.refusal is not None:
            return None
        return Schedule(self.cron, self.timezone)

    def env_value(self, name: str) -> str | None:
        value = None
        for line in self.env:
            if line.name == name:
                value = line.value
        return value

    @property
    def shell(self) -> str:
        return self.env_value("SHELL") or "/bin/sh"

    @property
    def mailto(self) -> str | None:
        return self.env_value("MAILTO")

    def next_runs(self, after: datetime, count: int = 3) -> list[datetime]:
        schedule = self.schedule
        out: list[datetime] = []
        if schedule is None:
            return out
        when = after
        for _ in range(count):
            when = schedule.next_after(when)
            out.append(when)
        return out


@dataclass(frozen=True)
class Crontab:
    """A parsed crontab: its schedule lines and its environment lines, in file order."""

    source: str
    system: bool
    entries: tuple[CronEntry, ...]
    env: tuple[EnvLine, ...]
    invalid: tuple[tuple[int, str, str], ...] = field(default=())  #: (line, text, why)

    @property
    def refused(self) -> list[CronEntry]:
        return [e for e in self.entries if e.refusal is not None]


def is_system_crontab(path: str) -> bool:
    """``/etc/crontab`` and ``/etc/cron.d/*`` carry a user field; user crontabs do not."""
    parts = PurePath(path).parts
    return parts == ("/", "etc", "crontab") or (len(parts) >= 2 and parts[-2] == "cron.d")


def parse_crontab(
    text: str, *, source: str = "crontab", system: bool = False, timezone: str | None = None
) -> Crontab:
    """Read ``text`` as a crontab. ``timezone`` is the zone of the host the crontab ran on: the
    zone of every line not under a ``CRON_TZ``; a line with neither is refused (cron's zone is
    the host's, which cannot be guessed from the file)."""
    env: list[EnvLine] = []
    entries: list[CronEntry] = []
    invalid: list[tuple[int, str, str]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        assignment = _env_line(lineno, line)
        if isinstance(assignment, str):
            invalid.append((lineno, raw, assignment))
            continue
        if assignment is not None:
            env.append(assignment)
            continue
        entry = _entry(lineno, raw, raw.lstrip(), system, tuple(env), timezone)
        if entry is None:
            invalid.append((lineno, raw, "not an environment line nor a schedule line"))
        else:
            entries.append(entry)
    return Crontab(source, system, _flag_chains(entries), tuple(env), tuple(invalid))


def translate_fields(fields: Sequence[str]) -> str:
    """The five Vixie cron fields as a cronsim expression with the same meaning (names become
    numbers, the leading ``*`` that selects Vixie's AND rule is kept). Raises
    :class:`ValueError` with one line when the fields cannot be translated exactly."""
    if len(fields) != 5:
        raise ValueError(f"expected 5 fields, got {len(fields)}")
    return " ".join(_field(text, *spec) for text, spec in zip(fields, _FIELDS, strict=True))


def _field(text: str, name: str, lo: int, hi: int, names: Sequence[str]) -> str:
    out = []
    for element in text.lower().split(","):
        match = _ELEMENT.match(element)
        if match is None:
            if re.search(r"[lw#?]", element):
                raise ValueError(
                    f"{name} {element!r}: L, W, # and ? are not Vixie cron syntax "
                    "(cronwarden will not guess what your cron made of them)"
                )
            raise ValueError(f"{name} {element!r} is not a cron field element")
        step = match["step"]
        if step is not None and (not step.isdigit() or int(step) == 0):
            raise ValueError(f"{name} {element!r}: the step must be a positive number")
        if match["base"] == "*":
            out.append("*" if step is None else f"*/{int(step)}")
            continue
        first = _number(match["lo"], name, lo, hi, names)
        if match["hi"] is None:
            if step is not None:
                raise ValueError(
                    f"{name} {element!r}: crons disagree on a single value with a step "
                    f"(Vixie cron 4.1 reads {first}, cronie refuses it, cronsim reads "
                    f"{first}-{hi}/{step}); write the range you mean"
                )
            out.append(str(first))
            continue
        last = _number(match["hi"], name, lo, hi, names)
        if last < first:
            raise ValueError(f"{name} {element!r}: the range runs backwards")
        out.append(f"{first}-{last}" + ("" if step is None else f"/{int(step)}"))
    return ",".join(out)


def _number(text: str, name: str, lo: int, hi: int, names: Sequence[str]) -> int:
    if text in names:
        return names.index(text) + (1 if name == "month" else 0)
    if not text.isdigit():
        hint = " (L and W are not Vixie cron syntax)" if re.search(r"[lw]", text) else ""
        raise ValueError(f"{name} {text!r} is neither a number nor a {name} name{hint}")
    value = int(text)
    if not lo <= value <= hi:
        raise ValueError(f"{name} {value} is out of range {lo}-{hi}")
    return value


def _env_line(lineno: int, line: str) -> EnvLine | str | None:
    """An environment line, or why cron would not read this assignment as one, or None for a
    line that is no assignment. Vixie cron 4.1 (``sscanf "%[^ =] = %[^\\n#]"``) and cronie (a
    quote-aware parser) agree on plain ``NAME=value`` and ``NAME="quoted value"``; where they
    disagree the line is refused."""
    match = _ENV.match(line)
    if match is None:
        return None
    name, value = match.group(1), match.group(2)
    if name.startswith("@") or name[0].isdigit() or name[0] in "*-,/":
        return None  # "*/5=..." or "0=..." are broken schedule lines, not assignments
    if not value:
        return f'{name}= has no value: cron does not read it as a setting; write {name}=""'
    if "#" in value:
        return (
            f"{name}: crons disagree on '#' in a value (Vixie cron ends the value there, "
            "cronie keeps it)"
        )
    if value[0] in "'\"":
        if len(value) < 2 or value[-1] != value[0]:
            return f"{name}: the value opens a quote it does not close at the end of the line"
        value = value[1:-1]
    return EnvLine(lineno, name, value)


def _entry(
    lineno: int,
    raw: str,
    line: str,
    system: bool,
    env: tuple[EnvLine, ...],
    timezone: str | None,
) -> CronEntry | None:
    words_needed = (1 if line.startswith("@") else 5) + (1 if system else 0)
    parts = line.split(None, words_needed)
    if len(parts) <= words_needed:
        if line.startswith("@") or len(parts) >= 5:
            spec = " ".join(parts[: words_needed - (1 if system else 0)])
            why = "the line has no command" + (
                " (a system crontab line is: schedule, user, command)" if system else ""
            )
            return CronEntry(lineno, raw, spec, "", None, None, env, refusal=why)
        return None
    spec_words = parts[: 1 if line.startswith("@") else 5]
    user = parts[len(spec_words)] if system else None
    command, stdin = split_percent(parts[-1])
    base = CronEntry(lineno, raw, " ".join(spec_words), command, stdin, user, env)
    if command.startswith("-"):
        return _replace(
            base,
            refusal="a command starting with '-' is an option in Vixie cron 4 (-q: do not log) "
            "and a command in other crons; remove the '-' part you do not mean",
        )
    zone = _zone(env, timezone)
    flags = _flags(base)
    try:
        cron = _translate_spec(spec_words)
    except ValueError as exc:
        return _replace(base, refusal=str(exc), flags=flags)
    if isinstance(zone, ValueError):
        return _replace(base, cron=cron, refusal=str(zone), flags=flags)
    try:
        Schedule(cron, zone)
    except InvalidJobDefinition as exc:
        return _replace(base, cron=cron, timezone=zone, refusal=str(exc), flags=flags)
    return _replace(base, cron=cron, timezone=zone, flags=flags + _day_flags(cron))


def split_percent(command: str) -> tuple[str, str | None]:
    """Cron's ``%`` rule: ``(command, stdin)``; stdin None when there is no unescaped ``%``.

    In the command, ``\\%`` becomes ``%`` and other backslashes stay; in the input, unescaped
    ``%`` become newlines, ``\\%`` becomes ``%`` and a final newline is added when missing
    (Vixie cron's do_command.c)."""
    out: list[str] = []
    escaped = False
    for index, char in enumerate(command):
        if escaped:
            escaped = False
            if char == "%":
                out[-1] = "%"
                continue
        elif char == "\\":
            escaped = True
        elif char == "%":
            return "".join(out), _stdin(command[index + 1 :])
        out.append(char)
    return "".join(out), None


def _stdin(text: str) -> str:
    """do_command.c: ``\\%`` -> ``%``, ``%`` -> newline, ``\\x`` stays; a newline is added when
    the last character written was not one (a trailing lone backslash does not count)."""
    out: list[str] = []
    escaped = need_newline = False
    for char in text:
        if escaped:
            if char != "%":
                out.append("\\")
        elif char == "%":
            char = "\n"
        escaped = char == "\\"
        if not escaped:
            out.append(char)
            need_newline = char != "\n"
    if escaped:
        out.append("\\")
    if need_newline:
        out.append("\n")
    return "".join(out)


def _translate_spec(words: Sequence[str]) -> str:
    if len(words) == 1:
        word = words[0].lower()
        if word == "@reboot":
            raise ValueError(
                "@reboot runs when a machine boots; a serverless job has no boot: "
                "run it from your deployment instead"
            )
        if word not in NICKNAMES:
            known = ", ".join(sorted({*NICKNAMES, "@reboot"}))
            raise ValueError(f"{words[0]!r} is not a cron nickname (known: {known})")
        return NICKNAMES[word]
    return translate_fields(words)


def _zone(env: Iterable[EnvLine], default: str | None) -> str | ValueError:
    zone = default
    source = "--timezone"
    for line in env:
        if line.name == "CRON_TZ":
            zone, source = line.value, f"CRON_TZ (line {line.lineno})"
    if zone is None:
        return ValueError(
            "no CRON_TZ above this line and no timezone given: cron used the host's zone, "
            "pass it (e.g. --timezone Europe/Berlin)"
        )
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return ValueError(f"{source}: {zone!r} is not a known IANA timezone")
    return zone


#: a schedule field (``*``, ``*/5``, ``0-30/10``, ``1,15``): no command starts with one
_CRON_FIELD = re.compile(r"(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*")
#: user names a system crontab line usually names: a user crontab's command never does
_USERS = frozenset({"root", "www-data", "nobody", "daemon", "postgres", "mysql", "backup"})


def _flags(entry: CronEntry) -> tuple[Flag, ...]:
    flags: list[Flag] = []
    if entry.spec.lower() == "@reboot":
        flags.append(Flag("reboot", "@reboot: decide where this runs now (deployment, startup)"))
    if entry.stdin is not None:
        flags.append(
            Flag(
                "percent",
                "an unescaped % ends the command; the rest is sent as its input: "
                "kept as cron did it (check it was meant, e.g. date +%F needs \\%)",
            )
        )
    first = entry.command.split(maxsplit=1)[0] if entry.command.strip() else ""
    if _CRON_FIELD.fullmatch(first):
        flags.append(
            Flag(
                "six-fields",
                f"the command starts with {first!r}, which reads as a schedule field: if this "
                "line has six fields (seconds first, not cron's), fix it; kept as cron reads it",
            )
        )
    elif (
        entry.user is None
        and first
        and first.isidentifier()
        and first.islower()
        and (" " in entry.command.strip() and first in _USERS)
    ):
        flags.append(
            Flag(
                "user-field",
                f"the command starts with {first!r}, a user name: a system crontab's user "
                "field? pass --system (or read it as an /etc crontab); kept as cron reads it",
            )
        )
    if redact(entry.command) != entry.command:
        flags.append(
            Flag(
                "secret-in-command",
                "the command holds a secret, and the job module will too: "
                "move it to an environment variable",
            )
        )
    return tuple(flags)


def _day_flags(cron: str) -> tuple[Flag, ...]:
    _m, _h, dom, _mon, dow = cron.split()
    if dom.startswith("*") or dow.startswith("*"):
        if dom not in ("*",) and dow not in ("*",):
            return (
                Flag(
                    "dom-and-dow",
                    f"day of month {dom!r} AND day of week {dow!r} (one starts with *, so "
                    "both must match): kept as cron reads it",
                ),
            )
        return ()
    return (
        Flag(
            "dom-or-dow",
            f"Vixie's rule: runs on day of month {dom} OR on day of week {dow}, not only when "
            "both match: kept as cron reads it",
        ),
    )


def _flag_chains(entries: list[CronEntry]) -> tuple[CronEntry, ...]:
    """Flag lines that start a little after another line on the same days: the usual sign of
    an ordering encoded in time ("B at 02:15 because A takes ten minutes")."""
    timed: list[tuple[tuple[str, str, str, str], int, CronEntry]] = []
    for entry in entries:
        if entry.cron is None or entry.refusal is not None:
            continue
        minute, hour, dom, month, dow = entry.cron.split()
        if minute.isdigit() and hour.isdigit():
            days = (dom, month, dow, entry.timezone or "")
            timed.append((days, int(hour) * 60 + int(minute), entry))
    extra: dict[int, Flag] = {}
    for days, start, entry in timed:
        earlier = [
            (start - other_start, other)
            for other_days, other_start, other in timed
            if other_days == days and 0 < start - other_start <= CHAIN_WINDOW_MINUTES
        ]
        if earlier:
            gap, other = min(earlier, key=lambda pair: pair[0])
            extra[entry.lineno] = Flag(
                "chained",
                f"starts {gap} min after line {other.lineno} on the same days: if it waits "
                f"for that line's work, declare the dependency instead of a time offset",
            )
    return tuple(
        _replace(e, flags=(*e.flags, extra[e.lineno])) if e.lineno in extra else e for e in entries
    )


def _replace(entry: CronEntry, **changes: Any) -> CronEntry:
    return replace(entry, **changes)
