"""The liveness watcher: alerts on the *absence* of success, not only on errors.

A check reads the status records that are due (one indexed query, :mod:`.due`: a job
nothing went wrong with since the watcher last judged it is not read), plus, the first time a
watcher sees a job definition, every job it does not know yet (the first check of a watcher
reads every status record); it compares them with the job definitions and the clock and
raises conditions:

* ``missed``   a due window is unaccounted for (:mod:`cronwarden.run.accounting`): no success, not
  in flight (queued within its grace, running with a live lease, failed with a retry due),
  not dead-lettered, not excused. Named by the oldest such window and how many there are,
  even when later windows succeeded. The job's status record proves most jobs fully
  accounted for; the others cost one bounded read of their run records;
* ``failing``  ``failure_threshold`` consecutive failures;
* ``stuck``    running longer than its max runtime;
* ``skipping`` ``skip_threshold`` lock-held skips since the last success (a lock that never frees);
* ``dead_letters`` dead-lettered windows in the store (per job: the store's record is the
  truth, also when the broker's message is gone), and messages waiting in the dead-letter
  queue that no job's alert accounts for (queue-wide).

Conditions that share a cause are one incident (:mod:`cronwarden.watch.incidents`).

Alert state lives in the status records and is written by compare-and-set, so a transition is
notified once however many watchers run (the loser stays quiet), recoveries are announced,
whichever process runs the watcher next. The same commit adds the transition's pending
deliveries, one per routed channel (:mod:`.outbox`); every check then sends what is due and
retries what failed (:mod:`.deliverer`), so a channel that is down gets the alert once it is
back.
"""

from __future__ import annotations

import contextlib
import gc
import uuid
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from ..jobs.definitions import Job, JobSet
from ..model.durations import format_duration
from ..model.errors import CommitConflict
from ..model.logs import get_logger
from ..model.ports import STATUS, Create, Merge, Queue, Record, Store, Update
from ..model.records import (
    ACCOUNTED_BASE,
    ACCOUNTED_THROUGH_TS,
    ALERTS,
    DELIVERIES,
    DUE_AT,
    SUSPICIOUS,
    WATCH_DUE,
    StatusRecord,
    due_ts,
    iso,
    parse_iso,
    status_key_of,
)
from ..model.redaction import redact
from ..run.accounting import Moment, account
from ..run.claiming import STATUS_MOVED, STATUS_MOVING_IN
from ..run.ledger import quarantined_text
from .alerting.text import format_instant
from .conditions import quiet_while_paused, run_conditions, snooze_filter
from .consumer_health import consumer_health, dead_lettered_events
from .deliverer import Deliverer, DeliveryState
from .due import ALWAYS, next_look
from .health import Alert as Alert
from .health import Condition as Condition
from .health import JobHealth as JobHealth
from .health import Report as Report
from .health import _about
from .incidents import fold, unowned_letters
from .notify import LogNotifier, Notifier
from .outbox import DeliveryPolicy, Targets, budget, entries_of, new_entries, trim

if TYPE_CHECKING:
    from .alerting.watchdog import CheckHook

WATCHER_RECORD = "_watcher"  #: status record of the watcher itself (queue-wide alerts)
#: jobs a check fetches one by one (a new or changed definition); more and it reads every
#: status record in one query
MAX_GETS = 25


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for one check, resumed after (only if it was
    enabled). A check builds a few objects per job (decoded status records, their health)
    that all stay alive until it returns and are then freed by reference counting; meanwhile
    their number triggers a full collection that walks every object of the process: measured
    at 10,000 jobs, 0.10 s of a 0.47 s check on SQLite. Reference counting still frees
    everything as usual; only the search for reference cycles waits until the check ends."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _fmt(when: datetime | None, tz: ZoneInfo | None = None) -> str:
    """UTC, plus the job's local time when ``tz`` is not UTC."""
    return format_instant(when, tz)


class Watcher:
    """Evaluates liveness of ``jobs`` from ``store`` (and the DLQ depth of ``queue``)."""

    def __init__(
        self,
        jobs: JobSet,
        store: Store,
        queue: Queue | None = None,
        *,
        notifiers: Sequence[Notifier] | None = None,
        clock: Any = None,
        hooks: Sequence[CheckHook] | None = None,
        horizon: timedelta = timedelta(days=30),
        delivery: DeliveryPolicy | None = None,
    ) -> None:
        """``horizon``: how far back windows are accounted for (default the records'
        retention, 30 days). ``delivery``: how alert deliveries are retried and given up
        (:class:`~cronwarden.watch.outbox.DeliveryPolicy`: 24 hours by default)."""
        self.jobs = jobs
        self.horizon = horizon
        self.store = store
        self.queue = queue
        self.notifiers = list(notifiers) if notifiers is not None else [LogNotifier()]
        self.clock = clock or (lambda: datetime.now(UTC))
        self.log = get_logger("watcher")
        if hooks is None:
            from .alerting.watchdog import default_hooks

            hooks = default_hooks()
        #: called after every check, completed or failed (heartbeat record, dead-man's switch)
        self.hooks = list(hooks)
        self.delivery = delivery or DeliveryPolicy()
        #: what the last check's deliveries did and left pending (``status``, ``check``, metrics)
        self.deliveries = DeliveryState()
        self._owner = f"watcher-{uuid.uuid4().hex[:12]}"  # holds delivery claims
        #: the job definitions this watcher judged (by identity): a job not here (new, or
        #: changed: a new schedule, grace, ...) is read and judged in full at the next check
        self._judged: dict[str, Job] = {}
        #: status records the last check read (``jobs`` in its report are the ones judged)
        self.last_read = 0

    # -- pure evaluation --------------------------------------------------------------------
    def evaluate(
        self,
        statuses: Iterable[Record],
        now: datetime,
        dlq_depth: int | None,
        only: Collection[str] | None = None,
    ) -> tuple[list[JobHealth], dict[str, Any]]:
        """Every job's health from ``statuses`` (a job without a record: none yet); with
        ``only``, the health of the jobs named there alone."""
        by_job = {r.key.job: r.data for r in statuses}
        moment = Moment(now, self.horizon)  # schedule answers shared by the jobs of a schedule
        jobs = self.jobs if only is None else [j for j in self.jobs if j.name in only]
        health = [self._job_health(job, by_job.get(job.name, {}), now, moment) for job in jobs]
        if any(item.job.after for item in health):
            from ..run.dependencies import waits_text

            for item in health:
                item.waiting_on = waits_text(self.jobs, item.job, by_job) if item.job.after else ""
        if self.jobs.consumers:  # event consumers: failures, dead letters, at_least
            dead = dead_lettered_events(self.queue, dlq_depth)
            health += consumer_health(self.jobs, by_job, now, dead)
        return health, by_job.get(WATCHER_RECORD, {})

    def _job_health(
        self, job: Job, status: dict[str, Any], now: datetime, moment: Moment | None = None
    ) -> JobHealth:
        """One job's conditions. A healthy job costs its status fields and the schedule
        answers ``moment`` shares; the per-condition work runs only where its input says a
        condition may hold (the verdicts are those of the full evaluation)."""
        if moment is None or moment.now != now or moment.horizon != self.horizon:
            moment = Moment(now, self.horizon)
        conditions: dict[Condition, Alert] = {}
        record = StatusRecord.from_data(status)
        last_window = record.last_success_window
        last_success = record.last_success_at
        _, expected_next, interval, _ = moment.answers(job.schedule)
        tz = job.schedule.tz
        grace = job.liveness.grace
        if not isinstance(grace, timedelta):  # moment.grace(job), without a second look-up
            grace = interval
        common = {"last_success": last_success, "expected_next": expected_next}
        accounting = account(self.store, job, status, now, horizon=self.horizon, moment=moment)

        gaps = accounting.gaps
        if gaps:
            from ..jobs.pause import excused as paused_at

            # windows that fell due while the job was paused are excused, not gaps
            gaps = [g for g in gaps if not paused_at(status, g.window, now)]
        if gaps and job.after:  # a dependent job misses a window only once its upstreams did
            from ..run.dependencies import due_gaps

            gaps = due_gaps(self.store, self.jobs, job, gaps, now)
        if gaps:
            oldest = gaps[0]
            more = f" and {len(gaps) - 1} more unaccounted window(s)" if len(gaps) > 1 else ""
            conditions[Condition.MISSED] = Alert(
                job.name,
                Condition.MISSED,
                True,
                f"{job.name} missed: no success for the {oldest.window_text} window "
                f"({_fmt(oldest.window, tz)}; {oldest.detail}; grace "
                f"{format_duration(job.grace_at(oldest.window))}){more}; last success "
                f"{_fmt(last_success, tz)}, next run expected {_fmt(expected_next, tz)}. "
                "First check: is the scheduler "
                "firing (Cloud Scheduler job / timer trigger / `cronwarden run`) and is a "
                "worker consuming the queue? Then the lock record and recent deploys; "
                f"`cronwarden backfill {job.name}` runs the window.",
                first_check="scheduler and worker",
                extra={"window": oldest.window_text, "unaccounted": len(gaps)},
                **common,
            )
        dead = accounting.dead_letters
        if dead:
            oldest = dead[0]
            conditions[Condition.DEAD_LETTERS] = Alert(
                job.name,
                Condition.DEAD_LETTERS,
                True,
                f"{job.name}: {len(dead)} dead-lettered window(s), oldest "
                f"{oldest.window_text}: {redact(oldest.detail)}. First check: "
                f"`cronwarden dlq windows` for the reasons; fix the cause, then `cronwarden dlq "
                f"redrive --job {job.name} --window {oldest.window_text}` (or `cronwarden dlq "
                "resolve ... --reason`).",
                first_check="cronwarden dlq windows",
                extra={"window": oldest.window_text, "dead_lettered": len(dead)},
                **common,
            )
        failures = record.consecutive_failures
        if failures >= job.liveness.failure_threshold:
            error = redact(record.error or "?")
            conditions[Condition.FAILING] = Alert(
                job.name,
                Condition.FAILING,
                True,
                f"{job.name} failing: {failures} consecutive failures; last error: {error}. "
                f"Last success {_fmt(last_success, tz)}, next run expected "
                f"{_fmt(expected_next, tz)}. "
                "First check: the error above, recent deploys, expired secrets or credentials.",
                first_check="last error",
                extra={"consecutive_failures": failures},
                **common,
            )
        started = record.started_at if record.status == "running" else None
        if started and now - started > job.max_runtime:
            conditions[Condition.STUCK] = Alert(
                job.name,
                Condition.STUCK,
                True,
                f"{job.name} stuck: run {status.get('run_id')} ({status.get('run_key')}) has "
                f"been running for {format_duration(now - started)}, over its max runtime of "
                f"{format_duration(job.max_runtime)}. First check: the logs of run_id "
                f"{status.get('run_id')} on {status.get('owner', '?')}; its lease expires at "
                f"{_fmt(parse_iso(status.get('lease_expires')), tz)} and another worker can "
                "then take over.",
                first_check="worker logs for the run id",
                extra={"run_id": status.get("run_id")},
                **common,
            )
        skips = record.skips_since_success
        if skips >= job.liveness.skip_threshold:
            conditions[Condition.SKIPPING] = Alert(
                job.name,
                Condition.SKIPPING,
                True,
                f"{job.name} skipping: {skips} runs skipped since the last success because the "
                f"lock was held (last by {status.get('last_skip_owner') or '?'}). First check: "
                "the lock record and whether its owner is still alive.",
                first_check="lock record",
                extra={"skips": skips},
                **common,
            )
        if job.slow_factor is not None or status.get(SUSPICIOUS):
            conditions.update(run_conditions(job, status, now, common))
        if Condition.MISSED in conditions or Condition.SKIPPING in conditions:
            quiet_while_paused(conditions, status, now, now)
        if record.quarantined:  # [ledger] items a human must check
            conditions[Condition.QUARANTINED] = Alert(
                job.name,
                Condition.QUARANTINED,
                True,
                quarantined_text(job.name, record.quarantined),
                first_check=f"cronwarden ledger list {job.name}",
                extra={"quarantined": record.quarantined},
                **common,
            )
        if conditions and (status.get(STATUS_MOVED) or status.get(STATUS_MOVING_IN)):
            conditions = {}  # the job runs on another provider now, or is moving in from one
        if conditions:
            conditions = {kind: _about(job, alert) for kind, alert in conditions.items()}
        return JobHealth(
            job, status, conditions, last_success, last_window, expected_next, accounting, grace
        )

    # -- checking with transitions ----------------------------------------------------------
    def check(self) -> Report:
        """Evaluate, notify transitions, persist alert state. One status query (+ DLQ depth).

        Then every hook runs (the watcher's heartbeat record, a dead-man's-switch ping), also
        when the check raised; a failing hook is logged and never masks the check's result.
        Python's cyclic garbage collector is paused while the check itself runs (not the
        hooks) and resumed after: see :func:`_collector_paused`."""
        try:
            with _collector_paused():
                report = self._check()
        except Exception as exc:
            self._after_check(None, exc)
            raise
        self._after_check(report, None)
        return report

    def _after_check(self, report: Report | None, error: BaseException | None) -> None:
        for hook in self.hooks:
            try:
                hook.after_check(self, report, error)
            except Exception as exc:
                self.log.error(
                    "watcher hook %s failed: %s",
                    type(hook).__name__,
                    redact(f"{type(exc).__name__}: {exc}"),
                    extra={"event": "watcher.hook_failed"},
                )

    def _check(self) -> Report:
        now = self.clock()
        targets = Targets.of(self.notifiers)
        deliverer = Deliverer(self.store, targets, self.delivery, owner=self._owner)
        #: transitions this check recorded: job → the outbox entries its commit added
        added: dict[str, list[dict[str, Any]]] = {}
        statuses, only = self._read(now)
        records = {r.key.job: r for r in statuses}
        self.last_read = len(statuses)
        depth = self.queue.dlq_depth() if self.queue is not None else None
        health, watcher_status = self.evaluate(statuses, now, depth, only)
        if only is not None and depth is not None and WATCHER_RECORD not in records:
            # its queue-wide alert state, when the heartbeat has not made it due yet
            own = self.store.get(status_key_of(WATCHER_RECORD))
            if own is not None:
                records[WATCHER_RECORD] = own
                watcher_status = own.data
        fired: list[Alert] = []
        recovered: list[Alert] = []
        active: list[Alert] = []
        for item in health:
            previous = set(item.status.get(ALERTS) or [])
            current = {c.value for c in item.conditions}
            active.extend(item.conditions.values())
            new = [a for c, a in item.conditions.items() if c.value not in previous]
            gone = [
                self._recovery(item, Condition(c))
                for c in sorted(previous - current)
                if c in Condition.__members__.values()
            ]
            # a snoozed job's transitions are held back (and announced once it ends)
            new, gone, fields = snooze_filter(item.status, new, gone, item.conditions, now)
            new, gone, folded = fold(item, new, gone)  # one incident per problem
            fields.update(folded)
            notify = current != previous or bool(fields)
            if "first_seen_at" not in item.status:
                fields["first_seen_at"] = iso(now)
                fields.setdefault("job_name", item.job.name)
            checkpoint = item.accounting.checkpoint
            if checkpoint is not None:
                fields[ACCOUNTED_THROUGH_TS] = int(checkpoint[0].timestamp())
                fields[ACCOUNTED_BASE] = checkpoint[1]
            due = self._due_fields(item, now)
            if notify:
                if current != previous:
                    fields.update({ALERTS: sorted(current), "alerts_updated_at": iso(now)})
                entries = new_entries(new + gone, targets, now, self.delivery, self._owner)
                won = self._set_alerts(
                    item.job.name, records.get(item.job.name), fields, entries, due
                )
                if not won:
                    continue  # another watcher notified this transition (or will)
                if entries:
                    added[item.job.name] = entries
                fired += new
                recovered += gone
            elif due:
                self._set_due(item.job.name, records.get(item.job.name), fields, due)
            elif fields:
                self.store.commit([Merge(status_key_of(item.job.name), fields)])
        if depth is not None:
            had = bool(watcher_status.get("alerts"))
            unowned = unowned_letters(self.queue, depth, health)  # letters no job's alert has
            if unowned > 0:
                alert = Alert(
                    WATCHER_RECORD,
                    Condition.DEAD_LETTERS,
                    True,
                    f"{unowned} message(s) waiting in the dead-letter queue. First check: "
                    "`cronwarden dlq list` for the reasons; fix the cause, then "
                    "`cronwarden dlq redrive`.",
                    first_check="cronwarden dlq list",
                    extra={"dlq_depth": depth},
                )
                active.append(alert)
                if not had:
                    fired.append(alert)
            elif had:  # empty again, or every letter left is a job's (alerted there)
                recovered.append(
                    Alert(
                        WATCHER_RECORD,
                        Condition.DEAD_LETTERS,
                        False,
                        "dead-letter queue is empty again",
                    )
                )
            if had != (unowned > 0):
                mine = [a for a in fired + recovered if a.job == WATCHER_RECORD]
                entries = new_entries(mine, targets, now, self.delivery, self._owner)
                won = self._set_alerts(
                    WATCHER_RECORD,
                    records.get(WATCHER_RECORD),
                    {
                        ALERTS: [Condition.DEAD_LETTERS.value] if unowned > 0 else [],
                        "alerts_updated_at": iso(now),
                        "dlq_depth": depth,
                    },
                    entries,
                )
                if not won:  # another watcher announced it
                    fired = [a for a in fired if a.job != WATCHER_RECORD]
                    recovered = [a for a in recovered if a.job != WATCHER_RECORD]
                elif entries:
                    added[WATCHER_RECORD] = entries
        for alert in fired + recovered:
            targets.announce(alert)  # the log line, at once
        self._deliver(deliverer, records, added, now)
        for item in health:
            self._judged[item.job.name] = item.job
        judged = {item.job.name for item in health}
        unread = sum(1 for job in self.jobs if job.name not in judged)
        own_record = records.get(WATCHER_RECORD)
        if own_record is not None and own_record.data.get(WATCH_DUE) != 0:  # read every check
            self.store.commit([Merge(status_key_of(WATCHER_RECORD), {WATCH_DUE: 0})])
        return Report(health, depth, active, fired, recovered, watcher_status, unread)

    # -- what a check reads -----------------------------------------------------------------
    def _read(self, now: datetime) -> tuple[list[Record], set[str] | None]:
        """The status records this check judges, and the names of the jobs to judge (None:
        every job). The due records (one indexed query), plus the jobs this watcher has not
        judged under their current definition and the jobs judged with others (dependents and
        their upstreams, event consumers): fetched one by one when few, else every record
        (the first check)."""
        wanted = {job.name for job in self.jobs if self._judged.get(job.name) is not job}
        if not self._judged or len(wanted) > MAX_GETS:  # the first check reads every record
            return self.store.query(STATUS), None
        records = self.store.query_due(due_ts(now))
        names = {r.key.job for r in records}
        wanted |= self._always()
        missing = sorted(wanted - names)
        if len(missing) > MAX_GETS:
            return self.store.query(STATUS), None
        for name in missing:
            record = self.store.get(status_key_of(name))
            if record is not None:
                records.append(record)
        return records, names | wanted

    def _always(self) -> set[str]:
        """Jobs judged with other jobs' records (a dependent job, its upstreams; an event
        consumer): read at every check."""
        names = set(self.jobs.consumers)
        for job in self.jobs:
            if job.after:
                names.add(job.name)
                names.update(job.after)
        return names

    def _due_fields(self, item: JobHealth, now: datetime) -> dict[str, Any]:
        """The due fields to write after judging ``item``: its ``watch_due`` when it moved,
        and ``due_at`` cleared once it passed (the watcher judged what it announced)."""
        fields: dict[str, Any] = {}
        look = next_look(item, now)
        if item.status.get(WATCH_DUE) != look:
            fields[WATCH_DUE] = look
        run_due = item.status.get(DUE_AT)
        if isinstance(run_due, int) and run_due <= due_ts(now):
            fields[DUE_AT] = None
        return fields

    def _set_due(
        self, name: str, seen: Record | None, fields: dict[str, Any], due: dict[str, Any]
    ) -> None:
        """Write ``due`` (with ``fields``) by compare-and-set against the record this check
        judged: a run's commit in between wrote its own due fields, which must stand. Then
        ``fields`` are merged with ``watch_due`` 0: the job is judged again at the next check
        (a look-again instant computed from the older record could be later than what the
        run's commit asked for)."""
        key = status_key_of(name)
        try:
            if seen is None:
                self.store.commit([Create(key, {**fields, **due})])
            else:
                self.store.commit([Update(key, {**seen.data, **fields, **due}, seen.version)])
        except CommitConflict:
            self.store.commit([Merge(key, {**fields, WATCH_DUE: ALWAYS})])

    def _deliver(
        self,
        deliverer: Deliverer,
        records: dict[str, Record],
        added: dict[str, list[dict[str, Any]]],
        now: datetime,
    ) -> None:
        """Send the transitions this check recorded (already claimed by their commit), then
        whatever else the outbox holds that is due (retries, expired claims, unrouted alerts
        a channel now takes). Never raises for a channel: see :mod:`.deliverer`."""
        state = DeliveryState(now=now, policy=self.delivery)
        for name, record in records.items():
            if record.data.get(DELIVERIES):
                state.outbox[name] = entries_of(record.data)
        for name, entries in added.items():
            held = [
                (str(e["id"]), channel, slot["until"])
                for e in entries
                for channel, slot in e["to"].items()
                if slot.get("state") == "sending"
            ]
            try:
                if held:
                    left = deliverer.send_held(name, entries, held, now, state.results)
                    if deliverer.has_due(left, now):  # older retries wait for no transition
                        seen = self.store.get(status_key_of(name))
                        left = deliverer.deliver_record(name, seen, now, state.results)
                    state.outbox[name] = left
                else:
                    state.outbox[name] = state.outbox.get(name, []) + entries
            except Exception as exc:  # the claims expire and another check sends them
                self.log.error(
                    "alert deliveries of %s not marked: %s",
                    name,
                    redact(f"{type(exc).__name__}: {exc}"),
                    extra={"event": "alert.outbox_failed", "job": name},
                )
        rest = {n: r for n, r in records.items() if n not in added}
        state.outbox.update(deliverer.run(rest, now, state.results))
        self.deliveries = state

    def _set_alerts(
        self,
        name: str,
        seen: Record | None,
        fields: dict[str, Any],
        entries: list[dict[str, Any]] | None = None,
        due: dict[str, Any] | None = None,
    ) -> bool:
        """Write a job's new alert state by compare-and-set against the status record this
        check read, with the transition's outbox ``entries`` added to the record's in the same
        commit. True when this watcher made the transition (and so delivers it); False
        when another watcher did first (the loser stays quiet). A conflict caused by a run's
        own status write (the alerts unchanged) is retried against the fresh record."""
        key = status_key_of(name)
        wanted = set(fields[ALERTS])
        before = set((seen.data if seen is not None else {}).get(ALERTS) or [])
        for _ in range(4):
            data = {**(seen.data if seen is not None else {}), **fields, **(due or {})}
            # judged on the record read: a fresher one is judged again at the next check (the
            # earliest look, never a later one than what a run's commit wrote)
            due = {WATCH_DUE: ALWAYS}
            if entries:
                data[DELIVERIES], dropped = trim(entries_of(data) + entries, budget(self.store))
                for entry in dropped:
                    self.log.error(
                        "alert outbox of %s is full: the oldest undelivered transition %s is "
                        "dropped",
                        name,
                        entry["id"],
                        extra={"event": "alert.delivery_dropped", "job": name},
                    )
            try:
                if seen is None:
                    self.store.commit([Create(key, data)])
                else:
                    self.store.commit([Update(key, data, seen.version)])
                return True
            except CommitConflict:
                seen = self.store.get(key)
                now_alerts = set((seen.data if seen is not None else {}).get(ALERTS) or [])
                if now_alerts != before or now_alerts == wanted:
                    return False  # another watcher wrote the alert state first
        return False

    def _recovery(self, item: JobHealth, kind: Condition) -> Alert:
        tz = item.job.schedule.tz
        alert = Alert(
            item.job.name,
            kind,
            False,
            f"{item.job.name} recovered from {kind.value}; last success "
            f"{_fmt(item.last_success, tz)}, next run expected {_fmt(item.expected_next, tz)}.",
            last_success=item.last_success,
            expected_next=item.expected_next,
        )
        return _about(item.job, alert)
