"""Job declarations: everything about a job that does not depend on where it runs."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .durations import DurationLike, format_duration, parse_duration
from .errors import InvalidJobDefinition
from .expect import Expect
from .schedule import Schedule

if TYPE_CHECKING:
    from .context import RunContext

Handler = Callable[["RunContext"], Any]

# Job names end up in Firestore document ids, Table Storage partition keys, Pub/Sub attribute
# values and Service Bus message ids; this alphabet is safe in all of them.
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
# Owners are team names or e-mail addresses; tags are short labels used to route alerts.
_OWNER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+/-]{0,99}$")
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,62}$")
_DESCRIPTION_MAX = 500


class Overlap(enum.StrEnum):
    """What a run does when another run of the same job holds the job's lock."""

    SKIP = "skip"  #: record a skip (reason ``lock_held``, naming the owner) and acknowledge
    DEFER = "defer"  #: put the request back with backoff, to run after the holder finishes
    FAIL = "fail"  #: record a failure and log an error: overlap is a bug for this job


@dataclass(frozen=True)
class Retry:
    """Bounded retries: ``max_attempts`` in total (first try included), then the dead-letter queue.

    Backoff doubles from ``min_backoff`` up to ``max_backoff``. Pub/Sub's dead-letter policy
    needs 5..100 attempts; the GCP adapter refuses values outside that range.
    """

    max_attempts: int = 5
    min_backoff: DurationLike = "10s"
    max_backoff: DurationLike = "10m"

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise InvalidJobDefinition("retry.max_attempts must be an integer")
        if not 1 <= self.max_attempts <= 100:
            raise InvalidJobDefinition(
                f"retry.max_attempts must be between 1 and 100, got {self.max_attempts}"
            )
        lo = parse_duration(self.min_backoff, field="retry.min_backoff")
        hi = parse_duration(self.max_backoff, field="retry.max_backoff")
        if lo < timedelta(0) or hi < lo:
            raise InvalidJobDefinition(
                f"retry backoff must satisfy 0 <= min_backoff <= max_backoff, got "
                f"{format_duration(lo)}..{format_duration(hi)}"
            )
        object.__setattr__(self, "min_backoff", lo)
        object.__setattr__(self, "max_backoff", hi)

    def backoff(self, attempt: int) -> timedelta:
        """Delay before attempt ``attempt + 1`` after attempt ``attempt`` failed."""
        lo, hi = parse_duration(self.min_backoff), parse_duration(self.max_backoff)
        return min(hi, lo * (1 << min(max(0, attempt - 1), 40)))


@dataclass(frozen=True)
class CatchUp:
    """Which missed windows a trigger enqueues besides the current one.

    ``CatchUp.none()`` (default) runs only the current window. ``CatchUp.oldest_first(within)``
    looks back ``within`` for windows with no finished run and enqueues them oldest first, at
    most ``max_per_tick`` per trigger tick.
    """

    within: timedelta | None = None
    max_per_tick: int = 1

    @classmethod
    def none(cls) -> CatchUp:
        return cls()

    @classmethod
    def oldest_first(cls, within: DurationLike, max_per_tick: int = 1) -> CatchUp:
        span = parse_duration(within, field="catch_up.within")
        if span <= timedelta(0):
            raise InvalidJobDefinition("catch_up.within must be positive")
        if max_per_tick < 1:
            raise InvalidJobDefinition("catch_up.max_per_tick must be at least 1")
        return cls(span, max_per_tick)

    @property
    def enabled(self) -> bool:
        return self.within is not None


@dataclass(frozen=True)
class Liveness:
    """Alert thresholds for the watcher.

    ``grace``: how long after a window its success may be missing before ``missed`` fires
    (default: one schedule interval, i.e. an alert at about twice the interval).
    ``failure_threshold``: consecutive failures that raise ``failing``.
    ``skip_threshold``: lock-held skips since the last success that raise ``skipping``.
    """

    grace: DurationLike | None = None
    failure_threshold: int = 3
    skip_threshold: int = 3

    def __post_init__(self) -> None:
        if self.grace is not None:
            grace = parse_duration(self.grace, field="liveness.grace")
            if grace < timedelta(0):
                raise InvalidJobDefinition("liveness.grace must not be negative")
            object.__setattr__(self, "grace", grace)
        for name in ("failure_threshold", "skip_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidJobDefinition(f"liveness.{name} must be a positive integer")


@dataclass(frozen=True)
class Job:
    """A scheduled job, declared once in user code and run by any provider."""

    name: str
    schedule: Schedule
    handler: Handler
    max_runtime: timedelta
    overlap: Overlap = Overlap.SKIP
    retry: Retry = field(default_factory=Retry)
    catch_up: CatchUp = field(default_factory=CatchUp)
    liveness: Liveness = field(default_factory=Liveness)
    description: str = ""
    owner: str = ""  #: who answers its alerts: a team name or an e-mail address
    tags: tuple[str, ...] = ()  #: labels for alert routing and ``status``
    expect: Expect | None = None  #: what a successful run must look like (else: suspicious)
    slow_factor: float | None = None  #: ``slow`` alert above this multiple of the p50 baseline

    def __call__(self, ctx: RunContext) -> Any:
        return self.handler(ctx)

    def grace_at(self, when: Any) -> timedelta:
        grace = self.liveness.grace
        return grace if isinstance(grace, timedelta) else self.schedule.interval_at(when)


def job(
    name: str,
    *,
    cron: str,
    timezone: str = "UTC",
    max_runtime: DurationLike,
    overlap: Overlap | str = Overlap.SKIP,
    retry: Retry | None = None,
    catch_up: CatchUp | None = None,
    liveness: Liveness | None = None,
    owner: str | None = None,
    tags: Iterable[str] | None = None,
    description: str | None = None,
    expect: Expect | None = None,
    slow_factor: float | None = None,
) -> Callable[[Handler], Job]:
    """Declare a job. Every value is checked here, so a bad definition fails at import time.

    >>> @job("nightly-export", cron="0 2 * * *", timezone="Europe/Berlin", max_runtime="30m")
    ... def nightly_export(ctx): ...
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidJobDefinition(
            f"job name {name!r}: use 1-63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    schedule = Schedule(cron, timezone)
    runtime = parse_duration(max_runtime, field=f"{name}: max_runtime")
    if runtime <= timedelta(0):
        raise InvalidJobDefinition(f"{name}: max_runtime must be positive, got {max_runtime!r}")
    try:
        overlap_policy = Overlap(overlap)
    except ValueError as exc:
        choices = ", ".join(o.value for o in Overlap)
        raise InvalidJobDefinition(
            f"{name}: overlap must be one of {choices}, got {overlap!r}"
        ) from exc
    owner_text, tag_tuple = _owner(name, owner), _tags(name, tags)
    if description is not None and (
        not isinstance(description, str) or len(description) > _DESCRIPTION_MAX
    ):
        raise InvalidJobDefinition(
            f"{name}: description must be text of at most {_DESCRIPTION_MAX} characters"
        )

    if expect is not None and not isinstance(expect, Expect):
        raise InvalidJobDefinition(f"{name}: expect must be a cronwarden.Expect")
    if slow_factor is not None and (
        isinstance(slow_factor, bool)
        or not isinstance(slow_factor, int | float)
        or not slow_factor > 1
    ):
        raise InvalidJobDefinition(f"{name}: slow_factor must be a number above 1")

    def decorate(handler: Handler) -> Job:
        if not callable(handler):
            raise InvalidJobDefinition(f"{name}: the handler must be callable")
        return Job(
            name=name,
            schedule=schedule,
            handler=handler,
            max_runtime=runtime,
            overlap=overlap_policy,
            retry=retry or Retry(),
            catch_up=catch_up or CatchUp(),
            liveness=liveness or Liveness(),
            description=(
                description.strip()
                if description is not None
                else (handler.__doc__ or "").strip().split("\n")[0]
            ),
            owner=owner_text,
            tags=tag_tuple,
            expect=None if expect is None or expect.empty else expect,
            slow_factor=None if slow_factor is None else float(slow_factor),
        )

    return decorate


def _owner(name: str, owner: object) -> str:
    if owner is None:
        return ""
    if not isinstance(owner, str) or not _OWNER.match(owner):
        raise InvalidJobDefinition(
            f"{name}: owner {owner!r}: use a team name or an e-mail address "
            "(letters, digits and . _ @ + / -, at most 100 characters)"
        )
    return owner


def _tags(name: str, tags: object) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise InvalidJobDefinition(f"{name}: tags must be a list of strings, got {tags!r}")
    values = tuple(tags)
    for tag in values:
        if not isinstance(tag, str) or not _TAG.match(tag):
            raise InvalidJobDefinition(
                f"{name}: tag {tag!r}: use 1-63 letters, digits and . _ : / -, "
                "starting with a letter or digit"
            )
    if len(set(values)) != len(values):
        raise InvalidJobDefinition(f"{name}: tags {list(values)!r} repeat a tag")
    return values


class JobSet:
    """The jobs a worker knows, by name. Built from modules or explicit jobs."""

    def __init__(self, jobs: Iterable[Job] = ()) -> None:
        self._jobs: dict[str, Job] = {}
        for item in jobs:
            self.add(item)

    def add(self, item: Job) -> None:
        if item.name in self._jobs and self._jobs[item.name] is not item:
            raise InvalidJobDefinition(f"two different jobs are named {item.name!r}")
        self._jobs[item.name] = item

    @classmethod
    def from_module(cls, module: ModuleType) -> JobSet:
        """Every :class:`Job` bound at the top level of ``module``."""
        jobs = [value for value in vars(module).values() if isinstance(value, Job)]
        return cls(sorted(jobs, key=lambda j: j.name))

    def get(self, name: str) -> Job | None:
        return self._jobs.get(name)

    def __getitem__(self, name: str) -> Job:
        return self._jobs[name]

    def __iter__(self) -> Any:
        return iter(self._jobs.values())

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, name: object) -> bool:
        return name in self._jobs


def check_dependencies(after: Mapping[str, Iterable[str]]) -> None:
    """Check a dependency graph ``{job: names it runs after}`` at import time: every name must
    be declared and there must be no cycle. Raises :class:`InvalidJobDefinition` with one line
    (``report: after 'exprot': no such job (known: export, report)``, or
    ``dependency cycle: a -> b -> c -> a``). A job may not run after itself."""
    known = sorted(after)
    for name in known:
        for upstream in after[name]:
            if upstream not in after:
                raise InvalidJobDefinition(
                    f"{name}: after {upstream!r}: no such job (known: {', '.join(known)})"
                )
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for upstream in sorted(set(after[name])):
            if state.get(upstream) == 1:
                cycle = [*path[path.index(upstream) :], upstream]
                raise InvalidJobDefinition(f"dependency cycle: {' -> '.join(reversed(cycle))}")
            if upstream not in state:
                visit(upstream)
        path.pop()
        state[name] = 2

    for name in known:
        if name not in state:
            visit(name)
