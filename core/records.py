"""The data of run, lock and status records, and the time format they use.

Times are ISO-8601 UTC text (sortable, JSON-safe on every store). Helpers here build the dicts
the engine commits; readers use :class:`RunView` / :class:`LockView` for typed access.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .model import RunState
from .ports import LOCK, RUN, STATUS, Key


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds")


def parse_iso(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def run_key_of(job: str, window_text: str) -> Key:
    return Key(RUN, job, window_text)


def lock_key_of(job: str) -> Key:
    return Key(LOCK, job)


def status_key_of(job: str) -> Key:
    return Key(STATUS, job)


@dataclass(frozen=True)
class RunView:
    """Typed read access to a run record's data."""

    data: dict[str, Any]

    @property
    def state(self) -> RunState:
        return RunState(self.data.get("state", RunState.RUNNING))

    @property
    def lease_expires(self) -> datetime | None:
        return parse_iso(self.data.get("lease_expires"))

    def lease_live(self, now: datetime) -> bool:
        expires = self.lease_expires
        return self.state is RunState.RUNNING and expires is not None and expires > now

    @property
    def owner(self) -> str:
        return str(self.data.get("owner", ""))

    @property
    def attempt(self) -> int:
        return int(self.data.get("attempt", 0))

    @property
    def fence(self) -> int:
        return int(self.data.get("fence", 0))

    @property
    def redrive(self) -> int:
        return int(self.data.get("redrive", 0))

    @property
    def budget_start(self) -> int:
        return int(self.data.get("budget_start", 0))


@dataclass(frozen=True)
class LockView:
    data: dict[str, Any]

    def live(self, now: datetime) -> bool:
        expires = parse_iso(self.data.get("lease_expires"))
        return expires is not None and expires > now

    @property
    def holder(self) -> str:
        return (
            f"{self.data.get('owner', '?')} (run {self.data.get('run_id', '?')}, "
            f"{self.data.get('run_key', '?')})"
        )


def expire_at(now: datetime, retention: timedelta) -> str:
    """The ``expire_at`` value stores use for production TTL policies."""
    return iso(now + retention)
