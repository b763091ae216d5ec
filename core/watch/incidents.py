"""One incident per problem: conditions that share a cause are announced together.

* A job's ``dead_letters`` and ``failing`` share their cause (runs that fail): when both fire in
  the same check they are one notification, the ``dead_letters`` alert, whose text names both
  (``extra["conditions"]``). The status record remembers the fold (:data:`FOLDED`), so recovery
  resolves exactly what was opened: the folded member's own recovery is not sent while its
  incident is open, both are named in the one recovery when they end together, and a member
  that outlives the incident it was folded into fires on its own (it is never left unannounced).
* The queue-wide dead-letter alert counts only the letters no job accounts for
  (:func:`unowned_letters`): a dead-lettered run is one incident, its job's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..model.logs import get_logger
from .health import Alert, Condition

if TYPE_CHECKING:
    from ..model.ports import Queue
    from .health import JobHealth

#: status field: conditions announced inside another condition's incident (still open)
FOLDED = "alerts_folded"
#: (primary, member): the member is folded into the primary's incident when both fire together
GROUPS: tuple[tuple[Condition, Condition], ...] = ((Condition.DEAD_LETTERS, Condition.FAILING),)
_PEEK_MAX = 1000
_SNOOZED = "still firing after snooze: "  # cronwarden.watch.conditions.snooze_filter's prefix

log = get_logger("watcher")


def _merged(primary: Alert, member: Alert) -> Alert:
    names = [primary.kind.value, member.kind.value]
    if primary.firing:
        also = member.text.removeprefix(_SNOOZED) if primary.text.startswith(_SNOOZED) else None
        text = f"{primary.text} Also {member.kind.value}: {also or member.text}"
    else:
        text = primary.text.replace(
            f"recovered from {primary.kind.value}", f"recovered from {' and '.join(names)}"
        )
    extra = {**member.extra, **primary.extra, "conditions": names}
    return dataclasses.replace(primary, text=text, extra=extra)


def fold(
    item: JobHealth, new: list[Alert], gone: list[Alert]
) -> tuple[list[Alert], list[Alert], dict[str, Any]]:
    """``item``'s transitions to announce, grouped; plus the status fields that record the
    fold (empty when it did not change). ``new`` / ``gone`` are this check's fired and
    recovered alerts of the job (after snoozing)."""
    before = {str(c) for c in item.status.get(FOLDED) or []}
    folded = set(before)
    fired = {a.kind: a for a in new}
    ended = {a.kind: a for a in gone}
    for primary, member in GROUPS:
        if member.value in folded:  # the member lives inside the primary's open incident
            if member in ended:
                folded.discard(member.value)
                if primary in ended:  # both end: one recovery naming both
                    ended[primary] = _merged(ended[primary], ended.pop(member))
                else:  # its incident stays open until the primary ends
                    del ended[member]
            elif primary in ended and member in item.conditions:
                # the incident ends but the member goes on: announce it on its own now
                folded.discard(member.value)
                fired[member] = item.conditions[member]
        if primary in fired and member in fired:
            fired[primary] = _merged(fired[primary], fired.pop(member))
            folded.add(member.value)
    fields: dict[str, Any] = {FOLDED: sorted(folded)} if folded != before else {}
    return list(fired.values()), list(ended.values()), fields


def unowned_letters(queue: Queue | None, depth: int | None, health: Sequence[JobHealth]) -> int:
    """How many of the ``depth`` messages in the dead-letter queue no job's alert accounts for.

    A letter is a job's when that job's ``dead_letters`` alert is active and names the letter's
    window among the dead-lettered windows the store recorded (an event consumer's alert counts
    its letters from the queue itself: any letter of that consumer). Every other letter is
    unowned: garbage, a job of another deployment, a window beyond the watcher's horizon or
    resolved in the store while the broker keeps its letter; so are letters past the first
    1,000, and all of them when the queue cannot be peeked. An unknown letter is alerted on,
    never hidden."""
    if not depth or depth <= 0 or queue is None:
        return max(depth or 0, 0)
    windows = {
        item.job.name: {dead.window_text for dead in item.accounting.dead_letters}
        for item in health
        if Condition.DEAD_LETTERS in item.conditions
    }
    if not windows:
        return depth
    try:
        letters = queue.dlq_peek(min(depth, _PEEK_MAX))
    except Exception as exc:  # peeking is a refinement: without it, every letter counts
        log.warning(
            "dead-letter queue peek failed (%s); counting every letter as unowned",
            type(exc).__name__,
            extra={"event": "watcher.dlq_peek_failed"},
        )
        return depth
    owned = 0
    for letter in letters:
        known = windows.get(letter.attributes.get("job", ""))
        if known is not None and (not known or letter.attributes.get("window") in known):
            owned += 1
    return max(depth - owned, 0)


__all__ = ["FOLDED", "GROUPS", "fold", "unowned_letters"]
