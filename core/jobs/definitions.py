"""Job declarations: everything about a job that does not depend on where it runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..model.durations import DurationLike, parse_duration
from ..model.errors import InvalidJobDefinition
from ..model.schedule import Schedule
from .expect import Expect
from .policies import _DESCRIPTION_MAX, _NAME, _owner, _tags
from .policies import CatchUp as CatchUp
from .policies import Handler as Handler
from .policies import Liveness as Liveness
from .policies import Overlap as Overlap
from .policies import Retry as Retry
from .top_level import check_held, note

if TYPE_CHECKING:
    from ..run.context import RunContext
    from .consumers import EventConsumer


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
    #: the jobs this one runs after (``after=``): it runs once per window every one of them
    #: succeeded in, never by time; its schedule is theirs (:mod:`cronwarden.run.dependencies`)
    after: tuple[str, ...] = ()
    #: an event consumer as the engine runs it (:meth:`JobSet.consumer_job`): one run per
    #: event key, fired by :func:`cronwarden.publish`; its schedule is a placeholder
    event_keyed: bool = False

    @property
    def timed(self) -> bool:
        """Whether schedule ticks fire this job (a dependent job is fired by completions, a
        consumer by events)."""
        return not self.after and not self.event_keyed

    def __call__(self, ctx: RunContext) -> Any:
        return self.handler(ctx)

    def grace_at(self, when: Any) -> timedelta:
        grace = self.liveness.grace
        return grace if isinstance(grace, timedelta) else self.schedule.interval_at(when)


def job(
    name: str,
    *,
    cron: str | None = None,
    timezone: str | None = None,
    after: str | Iterable[str] | None = None,
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

    ``after``: a job name or a list of names instead of ``cron``: the job runs once for each
    window in which every one of them succeeded (run key ``<name>:<their window>``), never by
    time, and takes their schedule (``cron``/``timezone`` with ``after`` are refused: a job is
    fired by time or by its upstreams, not both). Unknown names and cycles fail when the
    job set is built (at import of the job module).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidJobDefinition(
            f"job name {name!r}: use 1-63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    upstreams = _after(name, after)
    if cron is not None and not isinstance(cron, str):
        raise InvalidJobDefinition(f"{name}: cron must be text like '0 2 * * *', got {cron!r}")
    if timezone is not None and (not isinstance(timezone, str) or not timezone.strip()):
        raise InvalidJobDefinition(
            f"{name}: timezone must be an IANA name like 'Europe/Berlin' (None means UTC), "
            f"got {timezone!r}"
        )
    if upstreams and (cron is not None or timezone is not None):
        raise InvalidJobDefinition(
            f"{name}: after= and cron=/timezone= exclude each other: a dependent job runs "
            f"when {', '.join(upstreams)} succeeded, on their schedule, never by time"
        )
    if not upstreams and cron is None:
        raise InvalidJobDefinition(f"{name}: give cron= (a schedule) or after= (upstream jobs)")
    # a dependent job's schedule is a placeholder until the JobSet gives it its upstreams'
    schedule = Schedule("* * * * *" if cron is None else cron, timezone or "UTC")
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
    for field_name, value, kind, example in (
        ("retry", retry, Retry, "Retry(max_attempts=5)"),
        ("catch_up", catch_up, CatchUp, "CatchUp.oldest_first('3d')"),
        ("liveness", liveness, Liveness, "Liveness(grace='1h')"),
    ):
        if value is not None and not isinstance(value, kind):
            raise InvalidJobDefinition(
                f"{name}: {field_name} must be a cronwarden.{kind.__name__} "
                f"(e.g. {example}), got {value!r}"
            )
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
        declared = Job(
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
            after=upstreams,
        )
        note("job", name, declared, sys._getframe(1))
        return declared

    return decorate


def _after(name: str, after: object) -> tuple[str, ...]:
    if after is None:
        return ()
    names = (after,) if isinstance(after, str) else after
    if not isinstance(names, Iterable):
        raise InvalidJobDefinition(f"{name}: after must be a job name or a list of names")
    values = tuple(names)
    if not values:
        raise InvalidJobDefinition(f"{name}: after= names no job")
    for upstream in values:
        if not isinstance(upstream, str) or not _NAME.match(upstream):
            raise InvalidJobDefinition(f"{name}: after {upstream!r} is not a job name")
    if len(set(values)) != len(values):
        raise InvalidJobDefinition(f"{name}: after {list(values)!r} repeats a job")
    return values


class JobSet:
    """The jobs a worker knows, by name, and its event consumers. Built from modules or
    explicit jobs.

    Dependent jobs (``after=``) are checked when the set is built (unknown names and cycles
    raise :class:`InvalidJobDefinition` with one line) and take their upstreams' schedule
    (fan-in: all upstreams must share one schedule and timezone)."""

    def __init__(self, jobs: Iterable[Job] = (), consumers: Iterable[EventConsumer] = ()) -> None:
        self._jobs: dict[str, Job] = {}
        #: event consumers (:func:`cronwarden.consumer`) by name: not iterated with the jobs
        self.consumers: dict[str, EventConsumer] = {}
        self._consumer_jobs: dict[str, Job] = {}
        for item in jobs:
            self._put(item)
        for declared in consumers:
            self.add_consumer(declared)
        self._resolve()

    def _put(self, item: Job) -> None:
        if item.name in self._jobs and self._jobs[item.name] is not item:
            same = self._jobs[item.name]
            if not (item.after and same.handler is item.handler and same.after == item.after):
                raise InvalidJobDefinition(f"two different jobs are named {item.name!r}")
            return  # the same dependent job, before and after taking its upstreams' schedule
        self._jobs[item.name] = item

    def add(self, item: Job) -> None:
        """Add ``item`` (its upstreams must be in the set already)."""
        self._put(item)
        self._resolve()

    def add_consumer(self, declared: EventConsumer) -> None:
        if declared.name in self.consumers and self.consumers[declared.name] is not declared:
            raise InvalidJobDefinition(f"two different consumers are named {declared.name!r}")
        if declared.name in self._jobs:
            raise InvalidJobDefinition(f"{declared.name!r} names both a job and a consumer")
        self.consumers[declared.name] = declared

    def consumer_job(self, name: str) -> Job | None:
        """The consumer ``name`` as the engine runs it (claim, lease, retries, overlap per key)."""
        declared = self.consumers.get(name)
        if declared is None:
            return None
        if name not in self._consumer_jobs:
            self._consumer_jobs[name] = Job(
                name=declared.name,
                schedule=Schedule("* * * * *", "UTC"),  # ctx.window: the publish minute
                handler=declared.handler,
                max_runtime=declared.max_runtime,
                overlap=declared.overlap,
                retry=declared.retry,
                description=declared.description,
                owner=declared.owner,
                tags=declared.tags,
                event_keyed=True,
            )
        return self._consumer_jobs[name]

    def dependents_of(self, name: str) -> list[Job]:
        """The jobs that run after ``name`` (its completion events' targets), by name."""
        return [j for j in self._jobs.values() if name in j.after]

    def _resolve(self) -> None:
        check_dependencies({name: j.after for name, j in self._jobs.items()})
        done: set[str] = set()

        def visit(name: str) -> Job:
            item = self._jobs[name]
            if not item.after or name in done:
                return item
            ups = [visit(u) for u in item.after]
            shared = {(u.schedule.cron, u.schedule.timezone) for u in ups}
            if len(shared) > 1:
                listed = "; ".join(
                    f"{u.name}: {u.schedule.cron} ({u.schedule.timezone})" for u in ups
                )
                raise InvalidJobDefinition(
                    f"{name}: after= jobs must share one schedule (a window is theirs): {listed}"
                )
            resolved = replace(item, schedule=ups[0].schedule)
            self._jobs[name] = resolved
            done.add(name)
            return resolved

        for job_name in list(self._jobs):
            visit(job_name)

    @classmethod
    def from_module(cls, module: ModuleType) -> JobSet:
        """Every :class:`Job` and event consumer bound at the top level of ``module``.

        Raises :class:`InvalidJobDefinition` when one its top level declared is held by no
        top-level name any more (a later function of the same name took its variable): it
        would otherwise never run, and nothing would say so."""
        from .consumers import consumers_in

        jobs = [value for value in vars(module).values() if isinstance(value, Job)]
        check_held(module, "job", jobs)
        declared = consumers_in(module).values()
        return cls(sorted(jobs, key=lambda j: j.name), sorted(declared, key=lambda c: c.name))

    def get(self, name: str) -> Job | None:
        return self._jobs.get(name)

    def undeclared(self, attributes: Mapping[str, str]) -> str | None:
        """The job or event consumer a queued message's ``attributes`` name (``consumer``,
        else ``job``) when this set does not declare it; None when it does, or names none."""
        consumer = attributes.get("consumer")
        if consumer is not None:
            return None if consumer in self.consumers else consumer
        job = attributes.get("job")
        return None if job is None or job in self._jobs else job

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
