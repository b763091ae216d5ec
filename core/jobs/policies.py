"""What a job declares beside its schedule and handler: the overlap policy, retries, catch-up and
liveness thresholds, and the checks every declared name, owner and tag goes through (event
consumers share them with jobs)."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..model.durations import DurationLike, format_duration, parse_duration
from ..model.errors import InvalidJobDefinition

if TYPE_CHECKING:
    from ..run.context import RunContext

Handler = Callable[["RunContext"], Any]

# Job names end up in Firestore document ids, Table Storage partition keys, Pub/Sub attribute
# values and Service Bus message ids; this alphabet is safe in all of them.
# `\Z`, not `$`: `$` also matches before a final newline, and callers use `.match`.
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
# Owners are team names or e-mail addresses; tags are short labels used to route alerts.
_OWNER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+/-]{0,99}\Z")
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,62}\Z")
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
        """Delay before attempt ``attempt + 1`` after attempt ``attempt`` failed: ``min_backoff``
        doubled ``attempt - 1`` times, at most ``max_backoff`` (for any ``attempt``)."""
        delay, hi = parse_duration(self.min_backoff), parse_duration(self.max_backoff)
        # doubling stops at the cap: a power of two computed up front overflows timedelta
        for _ in range(max(0, attempt - 1)):
            if delay >= hi or delay <= timedelta(0):
                break
            delay *= 2
        return min(hi, delay)


@dataclass(frozen=True)
class CatchUp:
    """Which missed windows a trigger enqueues besides the current one.

    ``CatchUp.none()`` (default) runs only the current window. ``CatchUp.oldest_first(within)``
    looks back ``within`` for windows with no finished run and enqueues them oldest first, at
    most ``max_per_tick`` per trigger tick.
    """

    within: timedelta | None = None
    max_per_tick: int = 1

    def __post_init__(self) -> None:
        if self.within is not None:
            span = parse_duration(self.within, field="catch_up.within")
            if span <= timedelta(0):
                raise InvalidJobDefinition(
                    f"catch_up.within must be positive, got {format_duration(span)}"
                )
            object.__setattr__(self, "within", span)
        per_tick = self.max_per_tick
        if isinstance(per_tick, bool) or not isinstance(per_tick, int) or per_tick < 1:
            raise InvalidJobDefinition(
                f"catch_up.max_per_tick must be an integer of at least 1, got {per_tick!r}"
            )

    @classmethod
    def none(cls) -> CatchUp:
        return cls()

    @classmethod
    def oldest_first(cls, within: DurationLike, max_per_tick: int = 1) -> CatchUp:
        """Catch up windows missed in the last ``within``, ``max_per_tick`` per tick at most."""
        return cls(parse_duration(within, field="catch_up.within"), max_per_tick)

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
