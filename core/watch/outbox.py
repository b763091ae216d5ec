"""The durable alert outbox: what each alert transition still owes each channel.

A transition's pending deliveries live in the job's own status record, field
:data:`~cronwarden.model.records.DELIVERIES`, written by the very compare-and-set that records
the transition (atomic on every store, no new record kind). One entry per transition::

    {"id": "d-…", "alert": {…}, "created_at": "…", "expires_at": "…",
     "to": {"<channel>": {"state": "pending" | "sending", "attempts": 2, "next_at": "…",
                          "owner": "…", "until": "…", "error": "…", "failing_since": "…"}}}

A channel leaves ``to`` once delivered (or expired); an entry leaves the list once ``to`` is
empty. ``sending`` is a claim: its owner sends, then marks; a claim whose ``until`` has passed
(the owner crashed between send and mark) is due again, so a channel receives a transition at
most once per claim and at least once before the entry expires. The alert carries its entry id
as ``delivery_id`` (in webhook payloads, it makes the e-mail ``Message-ID``; PagerDuty's
``dedup_key`` is already stable per job and condition), so a re-send after a crash is
recognisably the same message.

An alert that no channel takes (no channel configured, or none routed) gets one entry for
:data:`UNROUTED`: it stays pending until a channel takes it (the first check with such a
channel hands it over) or it expires, and it is shown by ``status`` and ``check`` meanwhile.

This module is the data: :class:`Targets` (which channels the watcher's notifiers offer),
the entries and their transitions. :mod:`.deliverer` sends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..model.records import DELIVERIES, iso, parse_iso
from ..model.text import storable
from .health import Alert, Condition

UNROUTED = "unrouted"  #: the catch-all entry of an alert no channel took (yet)
MAX_ENTRIES = 32  #: pending transitions kept per status record; older ones are dropped loudly
MAX_TEXT = 3000  #: characters of alert text stored (status records have size limits)
MAX_ERROR = 300  #: characters of a channel's last error stored


@dataclass(frozen=True)
class DeliveryPolicy:
    """How long and how often a channel is retried, and when a failing delivery is an alert.

    ``expiry``: a transition not delivered this long after it was recorded is given up (an
    error log line and ``result="expired"``). ``backoff`` doubles per failed attempt up to
    ``max_backoff``. ``claim``: how long a sender holds a delivery before another may retry it
    (longer than any channel's timeout). A channel is *failing* after ``failing_attempts``
    failed attempts or ``failing_after`` of failures; it is then announced once on the other
    channels."""

    expiry: timedelta = timedelta(hours=24)
    backoff: timedelta = timedelta(seconds=30)
    max_backoff: timedelta = timedelta(minutes=30)
    claim: timedelta = timedelta(minutes=2)
    failing_attempts: int = 3
    failing_after: timedelta = timedelta(minutes=15)

    def retry_at(self, now: datetime, attempts: int) -> datetime:
        delay: timedelta = self.backoff * (2 ** max(0, min(attempts - 1, 20)))
        return now + min(delay, self.max_backoff)


Sender = Callable[[Alert], None]


@dataclass
class Targets:
    """The channels the watcher's notifiers offer, by stable name.

    ``immediate``: told at once, best effort (the log line: it cannot be lost in transit).
    ``senders``: durable channels; a sender raises when the alert did not arrive.
    ``filters``: which alerts a durable channel takes (a router's owner / tag routes)."""

    immediate: list[Any] = field(default_factory=list)
    senders: dict[str, Sender] = field(default_factory=dict)
    filters: dict[str, Callable[[Alert], bool]] = field(default_factory=dict)
    #: a router with routes is configured: an alert none of them takes is logged as unrouted
    routed: bool = False

    @classmethod
    def of(cls, notifiers: Sequence[Any]) -> Targets:
        from .alerting.channels import Channel, LogChannel
        from .alerting.routing import Router
        from .notify import LogNotifier, WebhookNotifier

        targets = cls()
        for notifier in notifiers:
            if isinstance(notifier, Router):
                targets.immediate.append(notifier.log_channel)
                targets.routed = targets.routed or bool(notifier.routes)
                for route in notifier.routes:
                    name = route.channel.name
                    if name in targets.senders and name in targets.filters:
                        before = targets.filters[name]
                        targets.filters[name] = _either(before, route.matches)
                        continue
                    name = targets._add(name, _counting(route.channel, route.channel.deliver))
                    targets.filters[name] = route.matches
            elif isinstance(notifier, LogNotifier | LogChannel):
                targets.immediate.append(notifier)
            elif isinstance(notifier, Channel):
                targets._add(notifier.name, _counting(notifier, notifier.deliver))
            elif isinstance(notifier, WebhookNotifier):
                targets._add("webhook", _counting(notifier, _webhook_sender(notifier)))
            else:
                label = getattr(notifier, "name", None)
                deliver = getattr(notifier, "deliver", None)
                targets._add(
                    label if isinstance(label, str) and label else type(notifier).__name__,
                    deliver if callable(deliver) else notifier.notify,
                )
        return targets

    def _add(self, name: str, sender: Sender) -> str:
        unique, n = name, 1
        while unique in self.senders or unique == UNROUTED:
            n += 1
            unique = f"{name}-{n}"
        self.senders[unique] = sender
        return unique

    def channels_for(self, alert: Alert) -> list[str]:
        """The durable channels that take ``alert`` (empty: it is unrouted)."""
        return [n for n in self.senders if n not in self.filters or self.filters[n](alert)]

    def announce(self, alert: Alert) -> None:
        """Tell the immediate notifiers (the log line); log ``alert.unrouted`` (error) when
        routes are configured and none takes ``alert`` (it waits in the outbox)."""
        for notifier in self.immediate:
            notifier.notify(alert)
        if self.routed and not self.channels_for(alert):
            from ..model.logs import get_logger

            get_logger("alert").error(
                "alert for %s (owner %s, tags %s) matches no channel; only this log has it "
                "until a channel takes it",
                alert.job,
                alert.extra.get("owner") or "none",
                ", ".join(alert.extra.get("tags") or ()) or "none",
                extra={"event": "alert.unrouted", "job": alert.job, "alert": alert.kind.value},
            )


def _either(a: Callable[[Alert], bool], b: Callable[[Alert], bool]) -> Callable[[Alert], bool]:
    return lambda alert: a(alert) or b(alert)


def _counting(owner: Any, sender: Sender) -> Sender:
    """``sender``, adding each failure to ``owner.failures`` (as the channel's ``notify``)."""

    def send_counted(alert: Alert) -> None:
        try:
            sender(alert)
        except Exception:
            owner.failures = int(getattr(owner, "failures", 0)) + 1
            raise

    return send_counted


def _webhook_sender(notifier: Any) -> Sender:
    """The plain ``$CRONWARDEN_WEBHOOK_URL`` webhook, with the same body, raising on failure."""

    def send_webhook(alert: Alert) -> None:
        from .alerting.http import send

        body = json.dumps({"text": alert.text, "alert": alert.fields()}).encode()
        send(
            notifier.url,
            body,
            headers={"Content-Type": "application/json"},
            timeout=notifier.timeout,
        )

    return send_webhook


# -- alerts as stored data ------------------------------------------------------------------
def alert_data(alert: Alert) -> dict[str, Any]:
    """``alert`` as JSON-safe data for the status record (text capped at :data:`MAX_TEXT`)."""
    extra = json.loads(json.dumps(alert.extra, default=str))
    return {
        "job": alert.job,
        "kind": alert.kind.value,
        "firing": alert.firing,
        "text": storable(alert.text[:MAX_TEXT]),
        "last_success": iso(alert.last_success) if alert.last_success else None,
        "expected_next": iso(alert.expected_next) if alert.expected_next else None,
        "first_check": alert.first_check,
        "extra": extra,
    }


def alert_of(data: Mapping[str, Any], delivery_id: str) -> Alert:
    """The stored alert, carrying ``delivery_id`` in its fields (webhook payloads, e-mail ids)."""
    kind = str(data.get("kind") or "")
    return Alert(
        str(data.get("job") or "?"),
        Condition(kind) if kind in Condition.__members__.values() else Condition.FAILING,
        bool(data.get("firing")),
        str(data.get("text") or ""),
        last_success=parse_iso(data.get("last_success")),
        expected_next=parse_iso(data.get("expected_next")),
        first_check=str(data.get("first_check") or ""),
        extra={**(data.get("extra") or {}), "delivery_id": delivery_id},
    )


def delivery_id(alert: Alert, now: datetime) -> str:
    """Stable for one transition: job, condition, state and the moment it was recorded."""
    blob = f"{alert.job}\x1f{alert.kind.value}\x1f{alert.firing}\x1f{iso(now)}"
    return "d-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


def entries_of(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The outbox of one status record's data (a copy, safe to change)."""
    value = data.get(DELIVERIES)
    if not isinstance(value, list):
        return []
    return [json.loads(json.dumps(e)) for e in value if isinstance(e, dict) and "id" in e]


def new_entries(
    alerts: Iterable[Alert],
    targets: Targets,
    now: datetime,
    policy: DeliveryPolicy,
    owner: str,
) -> list[dict[str, Any]]:
    """One entry per alert, every routed channel already claimed by ``owner`` (the watcher that
    records the transition sends it at once); an alert no channel takes is :data:`UNROUTED`."""
    out = []
    for alert in alerts:
        ident = delivery_id(alert, now)
        channels = targets.channels_for(alert)
        to = {c: claimed({}, owner, now, policy) for c in channels}
        out.append(
            {
                "id": ident,
                "alert": alert_data(alert),
                "created_at": iso(now),
                "expires_at": iso(now + policy.expiry),
                "to": to or {UNROUTED: {"state": "pending", "attempts": 0}},
            }
        )
    return out


def claimed(
    slot: Mapping[str, Any], owner: str, now: datetime, policy: DeliveryPolicy
) -> dict[str, Any]:
    """``slot`` claimed by ``owner`` until ``now + policy.claim``; the claim counts an attempt."""
    return {
        **slot,
        "state": "sending",
        "owner": owner,
        "until": iso(now + policy.claim),
        "attempts": int(slot.get("attempts") or 0) + 1,
    }


def due(slot: Mapping[str, Any], now: datetime) -> bool:
    """A pending slot whose retry time has come, or a claim that expired (its owner died)."""
    if slot.get("state") == "sending":
        until = parse_iso(slot.get("until"))
        return until is None or until <= now
    when = parse_iso(slot.get("next_at"))
    return when is None or when <= now


def failing(slot: Mapping[str, Any], now: datetime, policy: DeliveryPolicy) -> bool:
    """Failed ``failing_attempts`` times, or failing for ``failing_after`` already."""
    if not slot.get("error"):
        return False
    since = parse_iso(slot.get("failing_since"))
    return int(slot.get("attempts") or 0) >= policy.failing_attempts or (
        since is not None and now - since >= policy.failing_after
    )


def trim(
    entries: list[dict[str, Any]], max_bytes: int = 48_000
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """At most :data:`MAX_ENTRIES` and ``max_bytes`` of JSON (a field of a status record has
    the store's size limit: :func:`budget`), the newest kept; returns (kept, dropped)."""
    kept, dropped = entries[-MAX_ENTRIES:], entries[:-MAX_ENTRIES]
    while len(kept) > 1 and len(json.dumps(kept).encode()) > max_bytes:
        dropped.append(kept.pop(0))
    return kept, dropped


def budget(store: Any) -> int:
    """Bytes the outbox field may take on ``store``: three quarters of its text field limit
    (Table Storage 32,000, so a few alerts' worth; other stores 48,000)."""
    limit = int(getattr(getattr(store, "capabilities", None), "max_text_bytes", 64_000))
    return min(64_000, limit) * 3 // 4


# -- what is pending, for status / check / metrics -----------------------------------------
@dataclass(frozen=True)
class Pending:
    """One channel a transition has not reached yet."""

    job: str
    channel: str
    delivery_id: str
    alert: str  #: ``failing fired`` / ``missed recovered``
    created_at: datetime | None
    attempts: int
    error: str
    failing: bool


def pending_of(
    job: str, data: Mapping[str, Any], now: datetime, policy: DeliveryPolicy
) -> list[Pending]:
    out = []
    for entry in entries_of(data):
        alert = entry.get("alert") or {}
        what = f"{alert.get('kind')} {'fired' if alert.get('firing') else 'recovered'}"
        for channel, slot in (entry.get("to") or {}).items():
            out.append(
                Pending(
                    job,
                    channel,
                    str(entry["id"]),
                    what,
                    parse_iso(entry.get("created_at")),
                    int(slot.get("attempts") or 0),
                    str(slot.get("error") or ""),
                    failing(slot, now, policy),
                )
            )
    return out


def _age(now: datetime, created_at: datetime | None) -> str:
    """How long a transition waits, to the second (``0.000409s`` helps no one)."""
    from ..model.durations import format_duration

    if created_at is None:
        return "?"
    waited = now - created_at
    return format_duration(waited) if waited.total_seconds() >= 1 else "under a second"


def pending_lines(pending: Iterable[Pending], now: datetime) -> list[str]:
    """One line per job with undelivered alerts, for ``status`` and ``check``."""

    by_job: dict[str, list[Pending]] = {}
    for item in pending:
        by_job.setdefault(item.job, []).append(item)
    lines = []
    for job, items in sorted(by_job.items()):
        parts = []
        for item in items:
            age = _age(now, item.created_at)
            if item.channel == UNROUTED:
                parts.append(f"{item.alert} for {age}: no channel takes it (configure one)")
            else:
                state = "FAILING" if item.failing else "pending"
                tail = f", last error: {item.error}" if item.error else ""
                parts.append(
                    f"{item.alert} to {item.channel} {state} for {age} "
                    f"({item.attempts} attempt(s){tail})"
                )
        lines.append(f"UNDELIVERED {job}: " + "; ".join(parts))
    return lines


__all__ = [
    "DELIVERIES",
    "UNROUTED",
    "DeliveryPolicy",
    "Pending",
    "Targets",
    "alert_data",
    "alert_of",
    "entries_of",
    "new_entries",
    "pending_lines",
    "pending_of",
]
