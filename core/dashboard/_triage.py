"""Which jobs the overview must judge in full, and which its status record already settles.

The watcher writes ``watch_due`` after judging a job (:mod:`cronwarden.watch.due`): the
earliest instant its verdict can change by time alone, or 0 while it has alert state to follow.
A job whose record the watcher judged, that is not due (``due_at`` and ``watch_due`` both
later than now, the rule of :meth:`~cronwarden.model.ports.Store.query_due`), that carries no
alert state (:func:`cronwarden.watch.due.followed`) and whose verdict no other job's record
decides, had no condition when judged and none can have started since: a full evaluation
would find it without conditions. Its row's state comes from its record alone.

Everything else is judged in full, as the watcher would: due records, records no watcher has
judged yet (no ``watch_due``: a new job, a store no watcher ran on), jobs without a record, a
last run failed or dead-lettered, letters in the dead-letter queue, dependents, their upstreams
and event consumers, and a record whose ``watch_due`` lies beyond the deadline of the job's
*current* next window (the definition changed since the watcher judged it: a new schedule or
grace).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..jobs.definitions import Job
from ..model.records import DUE_AT, WATCH_DUE, due_ts
from ..run.accounting import Moment
from ..watch.due import followed

#: last run states that are problem rows whatever the watcher found (judged in full: alerting
#: or failing)
_FAILED = ("failed", "dead_lettered")


class Triage:
    """Decides per job whether its record settles its verdict (see the module)."""

    def __init__(self, now: datetime, horizon: timedelta, linked: set[str]) -> None:
        """``linked``: the jobs the watcher reads at every check because other jobs' records
        judge them (``Watcher._always()``: dependents, their upstreams, event consumers)."""
        self.now = now
        self.now_ts = due_ts(now)
        self.linked = linked
        self._moment = Moment(now, horizon)
        self._deadlines: dict[tuple[Any, Any], int] = {}

    def _deadline(self, job: Job) -> int:
        """The due instant (epoch seconds) of the job's current next window: ``expected_next
        + grace``, the latest ``watch_due`` the watcher writes under this definition. Asked
        once per distinct schedule and grace (a fleet shares a few)."""
        key = (job.schedule, job.liveness.grace)
        value = self._deadlines.get(key)
        if value is None:
            _, nxt, _, _ = self._moment.answers(job.schedule)
            value = self._deadlines[key] = due_ts(nxt + job.grace_at(nxt))
        return value

    def settled(self, job: Job, status: Mapping[str, Any] | None, dead_letters: int) -> bool:
        """True when a full evaluation of ``job`` would find no condition, by its record
        ``status`` (None: no record) and its letters in the dead-letter queue."""
        if not status or dead_letters or job.name in self.linked:
            return False
        look = status.get(WATCH_DUE)
        if not isinstance(look, int) or isinstance(look, bool) or look <= self.now_ts:
            return False  # never judged by a watcher, or due
        run_due = status.get(DUE_AT)  # the other due field (see Store.query_due)
        if isinstance(run_due, int) and not isinstance(run_due, bool) and run_due <= self.now_ts:
            return False
        if status.get("status") in _FAILED:
            return False
        data = status if isinstance(status, dict) else dict(status)
        if followed(data, self.now):
            return False
        return look <= self._deadline(job)


__all__ = ["Triage"]
