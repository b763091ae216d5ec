"""Bad declarations and bad run-time input fail at once with one line naming the field, never
later as a raw error, a silent default or a run retried forever (one test per finding)."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest, Uncertain
from cronwarden.adapters.local import LocalProvider
from cronwarden.cli.root import main
from cronwarden.hosting.trigger import WindowRefused, check_window
from cronwarden.jobs import JobSet
from cronwarden.jobs.consumers import event_slot
from cronwarden.jobs.definitions import CatchUp, Liveness, Retry
from cronwarden.model.durations import parse_duration
from cronwarden.model.errors import InvalidJobDefinition
from cronwarden.model.ports import RUN, Key
from cronwarden.model.runs import fingerprint, format_window, parse_window, run_key
from cronwarden.model.schedule import Schedule, parse_instant
from cronwarden.run.engine import Engine, EngineSettings
from cronwarden.run.ledger import Ledger
from tests.support.harness import FakeClock, at

W = at("2026-01-20T02:00Z")


def _handler(ctx: RunContext) -> None:
    """A handler with nothing to do."""


def _declare(**kwargs: Any) -> cronwarden.Job:
    values: dict[str, Any] = {"cron": "0 2 * * *", "max_runtime": "5m"}
    values.update(kwargs)
    return cronwarden.job(values.pop("name", "probe"), **values)(_handler)


def _engine(tmp_path: Path, job: cronwarden.Job, **settings: Any) -> tuple[LocalProvider, Engine]:
    provider = LocalProvider(str(tmp_path / "state.db"))
    clock = FakeClock(at("2026-01-20T02:01Z"))
    return provider, Engine(
        JobSet([job]), provider.store(), EngineSettings(clock=clock, **settings)
    )


# -- 1: ctx.count ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "amount", "error"),
    [(5, 1, TypeError), ("", 1, ValueError), ("sent", 1.5, TypeError), ("sent", True, TypeError)],
)
def test_count_refuses_a_bad_name_or_amount_in_the_handler(
    tmp_path: Path, name: Any, amount: Any, error: type[Exception]
) -> None:
    seen: list[BaseException] = []

    def handler(ctx: RunContext) -> None:
        try:
            ctx.count(name, amount)
        except Exception as exc:
            seen.append(exc)
            raise

    provider, engine = _engine(
        tmp_path, cronwarden.job("counts", cron="0 2 * * *", max_runtime="5m")(handler)
    )
    try:
        outcome = engine.execute(RunRequest("counts", W))
        # a handler error: the run failed (retried with its budget), not a store outage
        assert outcome.kind is OutcomeKind.FAILED, outcome
        assert [type(exc) for exc in seen] == [error]
        record = provider.store().get(Key(RUN, "counts", format_window(W)))
        assert record is not None and record.data["state"] == "failed"
    finally:
        provider.close()


def test_count_still_adds_up(tmp_path: Path) -> None:
    def handler(ctx: RunContext) -> None:
        ctx.count("sent")
        ctx.count("sent", 2)

    provider, engine = _engine(
        tmp_path, cronwarden.job("counts", cron="0 2 * * *", max_runtime="5m")(handler)
    )
    try:
        assert engine.execute(RunRequest("counts", W)).kind is OutcomeKind.SUCCEEDED
    finally:
        provider.close()


# -- 2: uncertain given as text -------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["quarantine", "QUARANTINE", " Quarantine ", Uncertain.QUARANTINE]
)
def test_uncertain_text_is_the_member(value: Any) -> None:
    assert EngineSettings(uncertain=value).uncertain is Uncertain.QUARANTINE
    ledger = Ledger(job="j", window="w", run_key="j:w", run_id="r", batch_size=1, uncertain=value)
    assert ledger.uncertain is Uncertain.QUARANTINE


@pytest.mark.parametrize("value", ["nonsense", "", None, 1])
def test_uncertain_refuses_anything_else_naming_the_choices(value: Any) -> None:
    with pytest.raises(ValueError, match="'redo', 'quarantine'"):
        EngineSettings(uncertain=value)
    with pytest.raises(ValueError, match="'redo', 'quarantine'"):
        Ledger(job="j", window="w", run_key="j:w", run_id="r", batch_size=1, uncertain=value)


def test_uncertain_quarantine_as_text_quarantines(tmp_path: Path) -> None:
    effects: Counter[str] = Counter()
    raise_at = ["i1"]

    def handler(ctx: RunContext) -> None:
        for item in ctx.items([f"i{n}" for n in range(3)]):
            if raise_at and item.key == raise_at[0]:
                raise_at.clear()
                raise RuntimeError("died mid-item")
            effects[item.key] += 1

    job = cronwarden.job("fan", cron="0 2 * * *", max_runtime="5m")(handler)
    provider, engine = _engine(tmp_path, job, batch_size=3, uncertain="quarantine")
    try:
        assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.FAILED
        second = engine.execute(RunRequest("fan", W))
        assert second.reason == "quarantined", second
        assert effects == {"i0": 1, "i2": 1}  # i1's side effect is never repeated
    finally:
        provider.close()


# -- 3: retry / liveness / catch_up of the wrong type ---------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("retry", 5), ("liveness", 3), ("catch_up", "3d"), ("retry", {"max_attempts": 3})],
)
def test_policies_of_the_wrong_type_fail_at_declaration(field: str, value: Any) -> None:
    with pytest.raises(InvalidJobDefinition, match=rf"^probe: {field} must be a cronwarden\."):
        _declare(**{field: value})


def test_catch_up_built_directly_is_checked() -> None:
    assert CatchUp(within="3d").within == timedelta(days=3)  # type: ignore[arg-type]
    assert CatchUp(within=timedelta(hours=1), max_per_tick=2).max_per_tick == 2
    for bad in ({"within": "soon"}, {"within": 0}, {"within": timedelta(-1)}):
        with pytest.raises(InvalidJobDefinition, match=r"catch_up\.within"):
            CatchUp(**bad)
    for per_tick in (0, -1, True, "2", 1.5):
        with pytest.raises(InvalidJobDefinition, match=r"catch_up\.max_per_tick"):
            CatchUp(within=timedelta(hours=1), max_per_tick=per_tick)  # type: ignore[arg-type]


# -- 4: backoff ------------------------------------------------------------------------------


def test_backoff_saturates_at_max_backoff_for_any_attempt() -> None:
    retry = Retry(max_attempts=100, min_backoff="10m", max_backoff="1h")
    assert [retry.backoff(n) for n in (0, 1, 2, 3)] == [
        timedelta(minutes=m) for m in (10, 10, 20, 40)
    ]
    for attempt in (4, 39, 40, 41, 100, 10**9):
        assert retry.backoff(attempt) == timedelta(hours=1)
    tiny = Retry(min_backoff=timedelta(microseconds=1), max_backoff="3653d")
    assert tiny.backoff(10**6) == timedelta(days=3653)
    assert Retry(min_backoff=0, max_backoff="1m").backoff(50) == timedelta(0)


# -- 5: fingerprints of plain objects --------------------------------------------------------


class Customer:
    def __init__(self, id: int, email: str) -> None:
        self.id = id
        self.email = email


class Slotted:
    __slots__ = ("id", "tier")

    def __init__(self, id: int, tier: str) -> None:
        self.id = id
        self.tier = tier


@dataclasses.dataclass
class Order:
    id: int
    customer: Customer


def test_plain_objects_are_fingerprinted_by_content() -> None:
    one, same, other = Customer(1, "a@x"), Customer(1, "a@x"), Customer(1, "b@x")
    assert fingerprint(one) == fingerprint(same) != fingerprint(other)
    assert fingerprint(Slotted(1, "gold")) == fingerprint(Slotted(1, "gold"))
    assert fingerprint(Slotted(1, "gold")) != fingerprint(Slotted(1, "free"))
    first, again = Order(7, Customer(1, "a@x")), Order(7, Customer(1, "a@x"))
    assert fingerprint(first) == fingerprint(again) != fingerprint(Order(7, other))
    # no content at all: the type stands for it, never the address
    assert fingerprint(object()) == fingerprint(object())
    loop = Customer(1, "a@x")
    loop.email = loop  # type: ignore[assignment]  # unencodable: the repr, addresses left out
    twin = Customer(1, "a@x")
    twin.email = twin  # type: ignore[assignment]
    assert fingerprint(loop) == fingerprint(twin)
    # what had a stable text keeps its fingerprint (resumed runs of older versions still match)
    assert fingerprint({"at": W}) == fingerprint({"at": str(W)})


def test_items_of_plain_objects_resume_after_a_failure(tmp_path: Path) -> None:
    effects: Counter[int] = Counter()
    kept: list[list[Customer]] = []  # alive: the next attempt's objects get other addresses

    def handler(ctx: RunContext) -> None:
        customers = [Customer(i, f"c{i}@x") for i in range(4)]
        kept.append(customers)
        for item in ctx.items(customers, key="id"):
            if len(kept) == 1 and item.value.id == 2:
                raise RuntimeError("transient")
            effects[item.value.id] += 1

    job = cronwarden.job("mail", cron="0 2 * * *", max_runtime="5m")(handler)
    provider, engine = _engine(tmp_path, job, batch_size=10)
    try:
        assert engine.execute(RunRequest("mail", W)).kind is OutcomeKind.FAILED
        second = engine.execute(RunRequest("mail", W))
        assert second.kind is OutcomeKind.SUCCEEDED, second
        assert effects == {0: 1, 1: 1, 2: 1, 3: 1}
    finally:
        provider.close()


# -- 6: instants and windows at the calendar's edges -----------------------------------------


@pytest.mark.parametrize("text", ["0001-01-01T00:00+01:00", "9999-12-31T23:59-01:00"])
def test_parse_instant_out_of_range_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="is out of range"):
        parse_instant(text)


def test_check_window_refuses_windows_before_the_year_1000() -> None:
    job = _declare(cron="0 * * * *")
    now = at("2026-01-20T02:01Z")
    for when in (datetime(1, 1, 1, tzinfo=UTC), datetime(999, 12, 31, 23, tzinfo=UTC)):
        with pytest.raises(WindowRefused, match="before the year 1000"):
            check_window(job, when, now)
    assert check_window(job, datetime(1000, 1, 1, tzinfo=UTC), now) == datetime(
        1000, 1, 1, tzinfo=UTC
    )


def test_windows_format_and_step_at_the_calendar_edges() -> None:
    early = datetime(999, 3, 4, 5, 6, tzinfo=UTC)
    assert format_window(early) == "0999-03-04T05:06Z"
    assert parse_window(format_window(early)) == early
    assert run_key("j", W) == "j:2026-01-20T02:00Z"
    hourly = Schedule("0 * * * *")
    end = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    assert list(hourly.windows(datetime(9999, 12, 31, 22, tzinfo=UTC), end)) == [
        datetime(9999, 12, 31, 22, tzinfo=UTC),
        datetime(9999, 12, 31, 23, tzinfo=UTC),
    ]
    with pytest.raises(ValueError, match="out of range"):
        list(hourly.windows(datetime(1, 1, 1, tzinfo=UTC), datetime(1, 1, 1, 5, tzinfo=UTC)))


@pytest.fixture
def jobs_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "edge_jobs.py").write_text(
        "import cronwarden\n\n"
        "@cronwarden.job('x', cron='0 * * * *', max_runtime='1m')\ndef x(ctx): pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRONWARDEN_PROVIDER", "local")
    monkeypatch.setenv("CRONWARDEN_LOCAL_PATH", str(tmp_path / "state.db"))
    return "edge_jobs.py"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["trigger", "x", "--window", "0001-01-01T00:00+01:00"], "out of range"),
        (["trigger", "x", "--window", "0999-06-01T00:00Z"], "before the year 1000"),
        (["backfill", "x", "--from", "0001-01-01T00:00+01:00"], "out of range"),
        (["backfill", "x", "--from", "0001-01-01T00:00Z"], "out of range"),
    ],
)
def test_cli_edge_instants_exit_2_with_one_line(
    jobs_file: str, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([args[0], "--jobs", jobs_file, *args[1:]])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("{")]
    assert exited.value.code == 2, err
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err


# -- 7: declaration values that raised raw errors --------------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "99999999999w", 1e300, 10**400])
def test_absurd_durations_are_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(InvalidJobDefinition, match=r"^probe: max_runtime: .*duration"):
        _declare(max_runtime=value)
    for field in ("min_backoff", "max_backoff"):
        with pytest.raises(InvalidJobDefinition, match=rf"^retry\.{field}: "):
            Retry(**{"min_backoff": "1s", "max_backoff": "1m", field: value})
    with pytest.raises(InvalidJobDefinition, match=r"^liveness\.grace: "):
        Liveness(grace=value)
    with pytest.raises(InvalidJobDefinition, match=r"^catch_up\.within: "):
        CatchUp.oldest_first(value)


def test_duration_limit_is_about_ten_years() -> None:
    assert parse_duration("3653d") == timedelta(days=3653)
    assert parse_duration(timedelta(days=3653)) == timedelta(days=3653)
    with pytest.raises(InvalidJobDefinition, match="limit of 3653 days"):
        parse_duration("3654d", field="x")
    with pytest.raises(InvalidJobDefinition, match="limit of 3653 days"):
        parse_duration(timedelta.max, field="x")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": 123}, r"^probe: cron must be text"),
        ({"cron": ""}, r"^cron '': expected 5 fields"),
        ({"timezone": 5}, r"^probe: timezone must be an IANA name"),
        ({"catch_up": "3d"}, r"^probe: catch_up must be"),
    ],
)
def test_schedule_values_of_the_wrong_type(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidJobDefinition, match=message):
        _declare(**kwargs)
    with pytest.raises(InvalidJobDefinition, match="cron must be text"):
        Schedule(123)  # type: ignore[arg-type]
    with pytest.raises(InvalidJobDefinition, match="timezone must be"):
        Schedule("* * * * *", 5)  # type: ignore[arg-type]


@pytest.mark.parametrize("per_tick", ["2", True, 0, 2.0])
def test_oldest_first_max_per_tick_is_a_positive_int(per_tick: Any) -> None:
    with pytest.raises(InvalidJobDefinition, match=r"^catch_up\.max_per_tick must be an integer"):
        CatchUp.oldest_first("1d", max_per_tick=per_tick)


# -- 8: a final newline ----------------------------------------------------------------------


def test_names_owners_tags_and_after_with_a_final_newline_are_refused() -> None:
    with pytest.raises(InvalidJobDefinition, match="job name 'nightly\\\\n'"):
        _declare(name="nightly\n")
    with pytest.raises(InvalidJobDefinition, match="owner"):
        _declare(owner="team-data\n")
    with pytest.raises(InvalidJobDefinition, match="tag"):
        _declare(tags=["billing\n"])
    with pytest.raises(InvalidJobDefinition, match="after"):
        cronwarden.job("down", after="nightly\n", max_runtime="1m")
    with pytest.raises(InvalidJobDefinition):
        cronwarden.consumer("on-order\n", key="id", max_runtime="1m")
    assert event_slot("order-1") == "e:order-1"
    assert event_slot("order-1\n").startswith("h:")  # hashed, never a key ending in a newline


# -- 9: silent defaults ----------------------------------------------------------------------


@pytest.mark.parametrize("timezone", ["", "  "])
def test_an_empty_timezone_is_refused(timezone: str) -> None:
    with pytest.raises(InvalidJobDefinition, match=r"^probe: timezone .*None means UTC"):
        _declare(timezone=timezone)
    assert _declare(timezone=None).schedule.timezone == "UTC"


@pytest.mark.parametrize("batch_size", [0, -1, True, 2.5])
def test_items_batch_size_below_one_is_refused(tmp_path: Path, batch_size: Any) -> None:
    seen: list[BaseException] = []

    def handler(ctx: RunContext) -> None:
        try:
            for _ in ctx.items(["a", "b"], batch_size=batch_size):
                pass
        except ValueError as exc:
            seen.append(exc)
            raise

    provider, engine = _engine(
        tmp_path, cronwarden.job("fan", cron="0 2 * * *", max_runtime="5m")(handler)
    )
    try:
        assert engine.execute(RunRequest("fan", W)).kind is OutcomeKind.FAILED
        assert len(seen) == 1 and "batch_size must be at least 1" in str(seen[0])
    finally:
        provider.close()


# -- follow-ups: keys by text, consumers' retry -----------------------------------------------


def test_items_without_a_key_whose_text_is_an_address_are_refused_before_any_effect(
    tmp_path: Path,
) -> None:
    effects: list[int] = []

    def handler(ctx: RunContext) -> None:
        for item in ctx.items([Customer(i, f"c{i}@x") for i in range(3)]):  # no key=
            effects.append(item.value.id)

    job = cronwarden.job("mail", cron="0 2 * * *", max_runtime="5m")(handler)
    provider, engine = _engine(tmp_path, job)
    try:
        outcome = engine.execute(RunRequest("mail", W))
        assert outcome.kind is OutcomeKind.FAILED
        assert "no stable key" in outcome.detail and "key=" in outcome.detail
        assert effects == []  # refused at the claim: no side effect to repeat on the retry
    finally:
        provider.close()


def test_a_consumer_retry_of_the_wrong_type_fails_at_declaration() -> None:
    with pytest.raises(InvalidJobDefinition, match=r"retry must be a cronwarden\.Retry"):
        cronwarden.consumer("orders", key="id", max_runtime="1m", retry=5)  # type: ignore[arg-type]
