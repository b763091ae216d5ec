"""The crontab reader against known lines: every translation is checked minute by minute
against an independent implementation of Vixie cron's matching rule (entry.c / cron.c)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from cronwarden.jobs.crontab import (
    is_system_crontab,
    parse_crontab,
    split_percent,
    translate_fields,
)
from cronwarden.model.schedule import Schedule

_NAMES = {
    3: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    4: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
}
_BOUNDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]


def _vixie_set(text: str, index: int) -> set[int]:
    """Vixie cron's get_list/get_range, for the elements Vixie accepts."""
    low, high = _BOUNDS[index]
    names = _NAMES.get(index, [])

    def number(word: str) -> int:
        word = word.lower()
        if word in names:
            return names.index(word) + (1 if index == 3 else 0)
        return int(word)

    out: set[int] = set()
    for element in text.split(","):
        base, _, step = element.partition("/")
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, b = base.split("-")
            first, last = number(a), number(b)
        else:
            first = last = number(base)
        out.update(range(first, last + 1, int(step) if step else 1))
    if index == 4 and 7 in out:  # Sunday is 0 and 7
        out.add(0)
    return out


def _vixie_matcher(fields: list[str]) -> Callable[[datetime], bool]:
    minute, hour, dom, month, dow = (_vixie_set(f, i) for i, f in enumerate(fields))
    dom_star, dow_star = fields[2].startswith("*"), fields[4].startswith("*")
    return lambda when: _matches(when, minute, hour, dom, month, dow, dom_star or dow_star)


def _matches(
    when: datetime,
    minute: set[int],
    hour: set[int],
    dom: set[int],
    month: set[int],
    dow: set[int],
    day_and: bool,
) -> bool:
    weekday = (when.weekday() + 1) % 7
    day_ok = (
        (when.day in dom and weekday in dow) if day_and else (when.day in dom or weekday in dow)
    )
    return when.minute in minute and when.hour in hour and when.month in month and day_ok


KNOWN_LINES = [
    "0 2 * * *",
    "*/15 * * * *",
    "0 0 1,15 * mon",  # Vixie's OR: the 1st, the 15th and every Monday
    "0 0 13 * fri",  # every 13th and every Friday, not only Friday the 13th
    "0 0 */2 * 1",  # day of month starts with *: AND (odd days that are Mondays)
    "30 4 1-7 * *",
    "5-59/20 9-17 * * MON-FRI",
    "0 22 * * 1-5",
    "0 8 * jan,jul sun",
    "15 3 * * 7",  # 7 is Sunday too
    "0 */6 * * *",
    "0 0 1 */3 *",
    "45 23 28-31 * *",
    "0 12 * * sat,SUN",
    "10,40 1-3 * feb-apr *",
    "0 0 * * 5-7",
]


@pytest.mark.parametrize("fields", KNOWN_LINES)
def test_translation_fires_exactly_when_vixie_cron_would(fields: str) -> None:
    schedule = Schedule(translate_fields(fields.split()), "UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = datetime(2026, 4, 30, 23, 59, tzinfo=UTC)
    expected: list[datetime] = []
    matches = _vixie_matcher(fields.split())
    when = start
    while when <= end:
        if matches(when):
            expected.append(when)
        when += timedelta(minutes=1)
    assert expected, "every known line fires in four months"
    assert list(schedule.windows(start, end)) == expected


def test_names_become_numbers_and_the_star_that_selects_and_is_kept() -> None:
    assert translate_fields(["0", "8", "*", "JAN,Jul", "sun"]) == "0 8 * 1,7 0"
    assert translate_fields(["0", "0", "*/2", "*", "mon-fri"]) == "0 0 */2 * 1-5"


@pytest.mark.parametrize(
    ("spec", "cron"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_nicknames(spec: str, cron: str) -> None:
    (entry,) = parse_crontab(f"{spec} /bin/true", timezone="UTC").entries
    assert (entry.cron, entry.command, entry.refusal) == (cron, "/bin/true", None)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("@reboot /opt/start.sh", "@reboot runs when a machine boots"),
        ("@fortnightly /bin/true", "'@fortnightly' is not a cron nickname"),
        ("5/15 * * * * /bin/true", "crons disagree on a single value with a step"),
        ("0 1 * * * -q /bin/true", "a command starting with '-' is an option"),
        ("0 0 L * * /bin/true", "L and W are not Vixie cron syntax"),
        ("0 0 15W * * /bin/true", "L and W are not Vixie cron syntax"),
        ("0 0 * * 5#3 /bin/true", "L, W, # and ? are not Vixie cron syntax"),
        ("0 0 ? * 1 /bin/true", "L, W, # and ? are not Vixie cron syntax"),
        ("0 24 * * * /bin/true", "hour 24 is out of range 0-23"),
        ("0 0 * 13 * /bin/true", "month 13 is out of range 1-12"),
        ("0 0 * * 5-1 /bin/true", "the range runs backwards"),
        ("*/0 * * * * /bin/true", "the step must be a positive number"),
        ("0 0 * foo * /bin/true", "neither a number nor a month name"),
        ("0 0 30 2 * /bin/true", "cron '0 0 30 2 *'"),  # February 30th never comes
        ("0 0 * * *", "the line has no command"),
    ],
)
def test_untranslatable_lines_are_refused_with_one_line(line: str, reason: str) -> None:
    (entry,) = parse_crontab(line, timezone="UTC").entries
    assert entry.refusal is not None and reason in entry.refusal
    assert "\n" not in entry.refusal
    assert entry.schedule is None


def test_no_timezone_is_refused_not_guessed() -> None:
    table = parse_crontab("0 2 * * * /bin/true\nCRON_TZ=Asia/Tokyo\n0 3 * * * /bin/true\n")
    first, second = table.entries
    assert first.refusal is not None and "--timezone" in first.refusal
    assert (second.refusal, second.timezone) == (None, "Asia/Tokyo")
    bad = parse_crontab("CRON_TZ=Mars/Olympus\n0 2 * * * /bin/true\n").entries[0]
    assert bad.refusal is not None and "'Mars/Olympus' is not a known IANA timezone" in bad.refusal


def test_cron_tz_schedules_in_that_zone() -> None:
    (entry,) = parse_crontab("CRON_TZ=Europe/Berlin\n30 2 * * * /bin/true\n").entries
    # 2026-03-29: 02:30 does not exist in Berlin (DST); cronsim fires at the first valid instant
    runs = entry.next_runs(datetime(2026, 3, 27, 12, tzinfo=UTC), 3)
    assert runs[0] == datetime(2026, 3, 28, 1, 30, tzinfo=UTC)  # 02:30 CET
    assert runs[2] == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)  # 02:30 CEST


@pytest.mark.parametrize(
    ("raw", "command", "stdin"),
    [
        ("echo hello", "echo hello", None),
        ("date +\\%F", "date +%F", None),
        ("mail -s hi root%line one%line two", "mail -s hi root", "line one\nline two\n"),
        ("cat%a\\%b%", "cat", "a%b\n"),
        ("printf 'x\\ty'", "printf 'x\\ty'", None),
        ("cat%back\\slash", "cat", "back\\slash\n"),
        ("cat%end\\", "cat", "end\\\n"),
        ("cat%", "cat", ""),
        ("date +%F", "date +", "F\n"),  # the classic crontab bug, kept as cron ran it
    ],
)
def test_percent_rule(raw: str, command: str, stdin: str | None) -> None:
    assert split_percent(raw) == (command, stdin)


def test_environment_lines_apply_to_the_lines_after_them() -> None:
    text = (
        "# a comment\n"
        "  # an indented comment\n"
        "SHELL=/bin/bash\n"
        'MAILTO = "ops@example.com"\n'
        "0 1 * * * first\n"
        "PATH='/opt/bin:/usr/bin'\n"
        "API_TOKEN=abcd1234efgh\n"
        "0 2 * * * second\n"
    )
    table = parse_crontab(text, timezone="UTC")
    first, second = table.entries
    assert [e.name for e in first.env] == ["SHELL", "MAILTO"]
    assert (first.shell, first.mailto) == ("/bin/bash", "ops@example.com")
    assert second.env_value("PATH") == "/opt/bin:/usr/bin"
    token = next(e for e in table.env if e.name == "API_TOKEN")
    assert token.secret and "abcd1234efgh" not in token.shown()
    assert not next(e for e in table.env if e.name == "PATH").secret


def test_system_crontab_has_a_user_field() -> None:
    text = "17 * * * * root cd / && run-parts --report /etc/cron.hourly\n@daily www-data php x\n"
    hourly, daily = parse_crontab(text, system=True, timezone="UTC").entries
    assert (hourly.user, hourly.command) == ("root", "cd / && run-parts --report /etc/cron.hourly")
    assert (daily.user, daily.command, daily.cron) == ("www-data", "php x", "0 0 * * *")
    (as_user,) = parse_crontab(text.splitlines()[0], timezone="UTC").entries
    assert (as_user.user, as_user.command.split()[0]) == (None, "root")
    assert is_system_crontab("/etc/crontab") and is_system_crontab("/etc/cron.d/php")
    assert not is_system_crontab("/home/me/crontab") and not is_system_crontab("crontab")


def test_decisions_are_flagged() -> None:
    text = (
        "0 2 * * * /opt/a.sh\n"
        "20 2 * * * /opt/b.sh\n"  # 20 minutes after a: looks chained
        "0 2 * * 1 /opt/c.sh\n"  # other days: not chained to a
        "0 0 1 * fri /opt/d.sh\n"
        "0 0 */2 * fri /opt/e.sh\n"
        "0 5 * * * mysqldump --password=s3cretpw db\n"
        "@reboot /opt/start.sh\n"
        "0 9 * * * date +%F\n"
    )
    table = parse_crontab(text, timezone="UTC")
    codes = {e.lineno: [f.code for f in e.flags] for e in table.entries}
    assert codes == {
        1: [],
        2: ["chained"],
        3: [],
        4: ["dom-or-dow"],
        5: ["dom-and-dow"],
        6: ["secret-in-command"],
        7: ["reboot"],
        8: ["percent"],
    }
    chained = table.entries[1].flags[0].message
    assert "20 min after line 1" in chained


def test_lines_that_are_neither_are_reported() -> None:
    table = parse_crontab("hello\n0 1 * * * ok\n", timezone="UTC")
    assert table.invalid == ((1, "hello", "not an environment line nor a schedule line"),)


def test_environment_lines_the_crons_disagree_on_are_refused() -> None:
    table = parse_crontab(
        'MAILTO=\nFOO=a#b\nBAR="open\nBAZ="x" y\nOK = "a b"\n0 1 * * * true\n', timezone="UTC"
    )
    reasons = {lineno: why for lineno, _text, why in table.invalid}
    assert reasons == {
        1: 'MAILTO= has no value: cron does not read it as a setting; write MAILTO=""',
        2: "FOO: crons disagree on '#' in a value "
        "(Vixie cron ends the value there, cronie keeps it)",
        3: "BAR: the value opens a quote it does not close at the end of the line",
        4: "BAZ: the value opens a quote it does not close at the end of the line",
    }
    assert [(e.name, e.value) for e in table.env] == [("OK", "a b")]
