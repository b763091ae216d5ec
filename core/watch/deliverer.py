"""Sends what the outbox (:mod:`.outbox`) owes: claim, send, mark, by compare-and-set.

Every :meth:`Watcher.check` runs a :class:`Deliverer` after evaluating, so wherever a watcher
runs (``cronwarden run``, ``check``, the serverless watcher, the pull hosts) alerts are sent.
For one status record:

1. *claim*: one compare-and-set marks every due channel ``sending`` (owner, ``until``); a
   conflict re-reads and decides again, so two deliverers never both hold one channel;
2. *send*: each claimed channel gets the alert (with its ``delivery_id``);
3. *mark*: one compare-and-set removes the delivered channels and records each failure (its
   error, the next attempt after a backoff), for the slots this deliverer still holds.

A crash between 2 and 3 leaves the claim, which expires and is sent again (same id). A
channel that keeps failing is announced once on the other channels; a transition that has not
reached a channel by its expiry is given up with an error log line. Never raises for a
channel's failure; a store error is logged and the rest waits for the next check.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..model.errors import CommitConflict
from ..model.logs import get_logger
from ..model.ports import Record, Store, Update
from ..model.records import DELIVERIES, iso, parse_iso, status_key_of
from ..model.redaction import redact
from .health import Alert
from .outbox import (
    MAX_ERROR,
    UNROUTED,
    DeliveryPolicy,
    Pending,
    Targets,
    alert_data,
    alert_of,
    budget,
    claimed,
    delivery_id,
    due,
    entries_of,
    failing,
    pending_lines,
    pending_of,
    trim,
)

_TRIES = 5  #: compare-and-set rounds against a record that runs keep writing


@dataclass
class DeliveryResults:
    """What one check's deliveries did: ``(channel, result)`` counts, result one of
    ``delivered`` / ``failed`` / ``expired`` / ``dropped``."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, channel: str, result: str, n: int = 1) -> None:
        self.counts[(channel, result)] = self.counts.get((channel, result), 0) + n


@dataclass
class DeliveryState:
    """One check's deliveries: what they did (``results``) and the outbox they left, by job
    (``outbox``, only records that hold one), as of ``now``."""

    now: datetime | None = None
    policy: DeliveryPolicy = field(default_factory=DeliveryPolicy)
    results: DeliveryResults = field(default_factory=DeliveryResults)
    outbox: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def pending(self) -> list[Pending]:
        """Every channel a transition has not reached yet, oldest transition first."""
        if self.now is None:
            return []
        out: list[Pending] = []
        for name, entries in sorted(self.outbox.items()):
            out += pending_of(name, {DELIVERIES: entries}, self.now, self.policy)
        return out

    def lines(self) -> list[str]:
        """One ``UNDELIVERED`` line per job with pending deliveries (``status``, ``check``)."""
        return pending_lines(self.pending(), self.now) if self.now is not None else []


class Deliverer:
    """Delivers the outbox entries of status records to ``targets``."""

    def __init__(
        self,
        store: Store,
        targets: Targets,
        policy: DeliveryPolicy,
        *,
        owner: str | None = None,
    ) -> None:
        self.store = store
        self.targets = targets
        self.policy = policy
        self.owner = owner or f"watcher-{uuid.uuid4().hex[:12]}"
        self.log = get_logger("alert")

    def run(
        self, records: Mapping[str, Record], now: datetime, results: DeliveryResults
    ) -> dict[str, list[dict[str, Any]]]:
        """Deliver what is due in ``records`` (job name → status record as read); returns the
        outbox of every record it touched, as left after this round."""
        left: dict[str, list[dict[str, Any]]] = {}
        for name, record in records.items():
            if record.data.get(DELIVERIES):
                try:
                    left[name] = self.deliver_record(name, record, now, results)
                except Exception as exc:  # a store error: the rest waits for the next check
                    self.log.error(
                        "alert deliveries of %s not processed: %s",
                        name,
                        redact(f"{type(exc).__name__}: {exc}"),
                        extra={"event": "alert.outbox_failed", "job": name},
                    )
        return left

    def has_due(self, entries: list[dict[str, Any]], now: datetime) -> bool:
        """Whether ``entries`` hold a slot this deliverer would claim or expire now."""
        for entry in entries:
            expires = parse_iso(entry.get("expires_at"))
            if expires is not None and expires <= now:
                return True
            for channel, slot in (entry.get("to") or {}).items():
                if channel in self.targets.senders and due(slot, now):
                    return True
        return False

    def deliver_record(
        self, name: str, seen: Record | None, now: datetime, results: DeliveryResults
    ) -> list[dict[str, Any]]:
        held: list[tuple[str, str, str]] = []  # (entry id, channel, until) this owner claimed
        entries: list[dict[str, Any]] = []
        key = status_key_of(name)
        for _ in range(_TRIES):
            if seen is None:
                return []
            entries = entries_of(seen.data)
            held, expired = self._claim(entries, now)
            if not held and not expired:
                return entries
            try:
                self.store.commit([Update(key, {**seen.data, DELIVERIES: entries}, seen.version)])
                break
            except CommitConflict:
                seen = self.store.get(key)
        else:
            return entries
        for channel in expired:
            results.add(channel, "expired")
        return self.send_held(name, entries, held, now, results)

    def _claim(
        self, entries: list[dict[str, Any]], now: datetime
    ) -> tuple[list[tuple[str, str, str]], list[str]]:
        """Claim every due slot in ``entries`` (changed in place); drop expired slots."""
        held: list[tuple[str, str, str]] = []
        expired: list[str] = []
        for entry in list(entries):
            to: dict[str, Any] = entry.setdefault("to", {})
            alert = entry.get("alert") or {}
            expires = parse_iso(entry.get("expires_at"))
            if expires is not None and expires <= now:
                for channel, slot in to.items():
                    expired.append(channel)
                    self.log.error(
                        "alert %s %s of %s never reached %s (%s attempt(s), last error: %s); "
                        "given up after %s",
                        alert.get("kind"),
                        "fired" if alert.get("firing") else "recovered",
                        alert.get("job"),
                        channel,
                        slot.get("attempts", 0),
                        slot.get("error") or "none",
                        self.policy.expiry,
                        extra={
                            "event": "alert.delivery_expired",
                            "job": alert.get("job"),
                            "channel": channel,
                            "delivery_id": entry["id"],
                        },
                    )
                entries.remove(entry)
                continue
            if UNROUTED in to:  # a channel may take it now
                channels = self.targets.channels_for(alert_of(alert, str(entry["id"])))
                if channels:
                    del to[UNROUTED]
                    for channel in channels:
                        to.setdefault(channel, {"state": "pending", "attempts": 0})
            for channel, slot in list(to.items()):
                if channel in self.targets.senders and due(slot, now):
                    to[channel] = claimed(slot, self.owner, now, self.policy)
                    held.append((str(entry["id"]), channel, to[channel]["until"]))
        return held, expired

    def send_held(
        self,
        name: str,
        entries: list[dict[str, Any]],
        held: list[tuple[str, str, str]],
        now: datetime,
        results: DeliveryResults,
    ) -> list[dict[str, Any]]:
        """Send the slots this owner holds, then mark them; returns the outbox as left."""
        by_id = {str(e["id"]): e for e in entries}
        outcome: dict[tuple[str, str], str] = {}  # (id, channel) → "" delivered, else error
        for ident, channel, _ in held:
            entry = by_id.get(ident)
            sender = self.targets.senders.get(channel)
            if entry is None or sender is None:
                continue
            alert = alert_of(entry.get("alert") or {}, ident)
            try:
                sender(alert)
                outcome[(ident, channel)] = ""
                results.add(channel, "delivered")
            except Exception as exc:
                error = redact(str(exc) or type(exc).__name__)[:MAX_ERROR]
                outcome[(ident, channel)] = error
                results.add(channel, "failed")
                self.log.error(
                    "alert channel %s failed for %s (%s): %s",
                    channel,
                    alert.job,
                    alert.kind.value,
                    error,
                    extra={
                        "event": "alert.delivery_failed",
                        "channel": channel,
                        "job": alert.job,
                        "alert": alert.kind.value,
                        "delivery_id": ident,
                    },
                )
        return self._mark(name, held, outcome, now, results)

    def _mark(
        self,
        name: str,
        held: list[tuple[str, str, str]],
        outcome: dict[tuple[str, str], str],
        now: datetime,
        results: DeliveryResults,
    ) -> list[dict[str, Any]]:
        key = status_key_of(name)
        tokens = {(i, c): until for i, c, until in held}
        entries: list[dict[str, Any]] = []
        for _ in range(_TRIES * 2):
            seen = self.store.get(key)
            if seen is None:
                return []
            entries = entries_of(seen.data)
            escalations: list[Alert] = []
            for entry in entries:
                to = entry.get("to") or {}
                for channel, slot in list(to.items()):
                    ident = str(entry["id"])
                    if (ident, channel) not in outcome:
                        continue
                    if slot.get("owner") != self.owner or slot.get("until") != tokens.get(
                        (ident, channel)
                    ):
                        continue  # the claim expired and another sender took it over
                    error = outcome[(ident, channel)]
                    if not error:
                        del to[channel]
                        continue
                    slot = {k: v for k, v in slot.items() if k not in ("owner", "until", "state")}
                    slot.update(
                        state="pending",
                        error=error,
                        next_at=iso(self.policy.retry_at(now, int(slot.get("attempts") or 1))),
                    )
                    slot.setdefault("failing_since", iso(now))
                    if failing(slot, now, self.policy) and not slot.get("announced"):
                        slot["announced"] = True
                        escalations.append(self._failing_alert(entry, channel, slot))
                    to[channel] = slot
            entries = [e for e in entries if e.get("to")]
            entries += self._escalation_entries(escalations, now)
            entries, dropped = trim(entries, budget(self.store))
            try:
                self.store.commit([Update(key, {**seen.data, DELIVERIES: entries}, seen.version)])
            except CommitConflict:
                continue
            self._report_dropped(name, dropped, results)
            return entries
        self.log.error(
            "alert deliveries of %s sent but not marked (the record kept changing); they are "
            "sent again once their claim expires",
            name,
            extra={"event": "alert.outbox_unmarked", "job": name},
        )
        return entries

    def _failing_alert(self, entry: dict[str, Any], channel: str, slot: dict[str, Any]) -> Alert:
        alert = alert_of(entry.get("alert") or {}, str(entry["id"]))
        state = "fired" if alert.firing else "recovered"
        extra = {k: v for k, v in alert.extra.items() if k != "delivery_id"}
        return Alert(
            alert.job,
            alert.kind,
            alert.firing,  # a recovery's escalation must not re-open an incident
            f"alert channel {channel} is failing: the {alert.kind.value} {state} alert of "
            f"{alert.job} has not reached it after {slot.get('attempts')} attempt(s) (last "
            f"error: {slot.get('error')}); retrying until it expires. The alert was: "
            f"{alert.text}",
            first_check=f"channel {channel} (its URL, credentials, the service's status)",
            extra={**extra, "delivery_failing": channel},
        )

    def _escalation_entries(self, alerts: list[Alert], now: datetime) -> list[dict[str, Any]]:
        out = []
        for alert in alerts:
            failed = alert.extra["delivery_failing"]
            others = [c for c in self.targets.senders if c != failed]
            if not others:
                continue  # no other channel: status / check / metrics show the failure
            out.append(
                {
                    "id": delivery_id(alert, now) + "-" + failed,
                    "alert": alert_data(alert),
                    "created_at": iso(now),
                    "expires_at": iso(now + self.policy.expiry),
                    "to": {c: {"state": "pending", "attempts": 0} for c in others},
                }
            )
        return out

    def _report_dropped(
        self, name: str, dropped: list[dict[str, Any]], results: DeliveryResults
    ) -> None:
        for entry in dropped:
            for channel in entry.get("to") or {}:
                results.add(channel, "dropped")
            self.log.error(
                "alert outbox of %s is full: the oldest undelivered transition %s (%s) is dropped",
                name,
                entry["id"],
                (entry.get("alert") or {}).get("kind"),
                extra={"event": "alert.delivery_dropped", "job": name},
            )
