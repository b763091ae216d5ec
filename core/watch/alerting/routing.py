"""Which channels an alert goes to.

A route sends to its channel every alert whose job has one of ``owners`` or one of ``tags``; a
route with neither takes every alert. Queue-wide alerts (dead letters) carry no owner, so they
reach the unfiltered routes. The log channel always gets every alert, and an alert that matches
no other route is logged as ``alert.unrouted`` (error): it is never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...model.logs import get_logger
from .channels import Channel, LogChannel

if TYPE_CHECKING:
    from ..health import Alert


@dataclass(frozen=True)
class Route:
    channel: Channel
    owners: frozenset[str] = field(default_factory=frozenset)
    tags: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, channel: Channel, owners: Iterable[str] = (), tags: Iterable[str] = ()) -> Route:
        return cls(channel, frozenset(owners), frozenset(tags))

    @property
    def catch_all(self) -> bool:
        return not self.owners and not self.tags

    def matches(self, alert: Alert) -> bool:
        if self.catch_all:
            return True
        owner = alert.extra.get("owner")
        tags = set(alert.extra.get("tags") or ())
        return owner in self.owners or bool(tags & self.tags)


class Router:
    """A ``Notifier`` (``notify(alert)``, never raises) that fans alerts out along routes."""

    def __init__(self, routes: Sequence[Route] = (), *, log: Channel | None = None) -> None:
        self.routes = list(routes)
        self.log_channel = log or LogChannel()
        self.log = get_logger("alert")

    @property
    def channels(self) -> list[Channel]:
        """The log channel, then each routed channel once."""
        seen: dict[int, Channel] = {id(self.log_channel): self.log_channel}
        for route in self.routes:
            seen.setdefault(id(route.channel), route.channel)
        return list(seen.values())

    def channels_for(self, alert: Alert) -> list[Channel]:
        chosen: dict[int, Channel] = {}
        for route in self.routes:
            if route.matches(alert):
                chosen.setdefault(id(route.channel), route.channel)
        return list(chosen.values())

    def notify(self, alert: Alert) -> None:
        self.log_channel.notify(alert)
        targets = self.channels_for(alert)
        if self.routes and not targets:
            self.log.error(
                "alert for %s (owner %s, tags %s) matches no channel; only this log has it",
                alert.job,
                alert.extra.get("owner") or "none",
                ", ".join(alert.extra.get("tags") or ()) or "none",
                extra={"event": "alert.unrouted", "job": alert.job, "alert": alert.kind.value},
            )
        for channel in targets:
            channel.notify(alert)
