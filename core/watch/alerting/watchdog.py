"""Watching the watcher, and pinging from outside the failure domain.

* :class:`StoreHeartbeat` records every check in the watcher's own status record
  (kind ``status``, reserved job name ``_watcher``, which no job can take: job names have no
  ``_``), so ``status`` can say when the watcher last ran. :func:`read_watcher_heartbeat`
  reads it back.
* :class:`DeadMansSwitch` pings an outside monitor after every check: Healthchecks.io
  (``/ping/<uuid>``, ``/fail`` when the check itself failed), Cronitor telemetry
  (``?state=complete|fail``) or Sentry Crons HTTP check-ins (``?status=ok|error``). A watcher
  that stops is then seen by a service that does not share its failure domain.
* :class:`JobPings` pings per job on run start, success and failure, with the same formats;
  :class:`JobPingHandler` drives it from the engine's structured log events.

Hooks never raise into the watcher: a failed ping or heartbeat write is logged and counted.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from ...model.errors import ConfigurationError
from ...model.logs import get_logger
from ...model.ports import Merge, Store
from ...model.records import WATCH_DUE, iso, parse_iso, status_key_of
from ...model.redaction import redact, register_secret, snippet
from .http import DeliveryError, send

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from ..watcher import Report, Watcher

HEARTBEAT_URL_ENV = "CRONWARDEN_HEARTBEAT_URL"  #: dead-man's-switch URL (a credential)
HEARTBEAT_FORMAT_ENV = "CRONWARDEN_HEARTBEAT_FORMAT"  #: healthchecks | cronitor | sentry
WATCHER_JOB = "_watcher"  #: the reserved status record (same as liveness.WATCHER_RECORD)


class CheckHook(Protocol):
    """Runs after every :meth:`Watcher.check`: ``report`` when it completed, else ``error``."""

    def after_check(
        self, watcher: Watcher, report: Report | None, error: BaseException | None
    ) -> None: ...


class PingFormat(enum.StrEnum):
    HEALTHCHECKS = "healthchecks"
    CRONITOR = "cronitor"
    SENTRY = "sentry"


class PingState(enum.StrEnum):
    START = "start"
    SUCCESS = "success"
    FAIL = "fail"


_CRONITOR = {PingState.START: "run", PingState.SUCCESS: "complete", PingState.FAIL: "fail"}
_SENTRY = {PingState.START: "in_progress", PingState.SUCCESS: "ok", PingState.FAIL: "error"}


def ping_format(value: object, field: str = "format") -> PingFormat:
    try:
        return PingFormat(str(value).strip().lower())
    except ValueError:
        choices = ", ".join(f.value for f in PingFormat)
        raise ConfigurationError(f"{field}: {value!r} is not one of {choices}") from None


def ping_request(
    url: str, fmt: PingFormat, state: PingState, message: str = ""
) -> tuple[str, bytes | None]:
    """The URL (and body) of one ping in ``fmt``.

    Healthchecks.io: ``URL`` / ``URL/start`` / ``URL/fail``, the message as the POST body.
    Cronitor: ``URL?state=run|complete|fail&message=…``. Sentry Crons:
    ``URL?status=in_progress|ok|error``.
    """
    if fmt is PingFormat.HEALTHCHECKS:
        parts = urllib.parse.urlsplit(url)
        path = parts.path.rstrip("/")
        if state is not PingState.SUCCESS:
            path += f"/{state.value}"
        target = urllib.parse.urlunsplit(parts._replace(path=path))
        return target, message.encode()[:10_000]
    query: dict[str, str]
    if fmt is PingFormat.CRONITOR:
        query = {"state": _CRONITOR[state]}
        if message:
            query["message"] = message[:2000]
    else:
        query = {"status": _SENTRY[state]}
    joiner = "&" if urllib.parse.urlsplit(url).query else "?"
    return url + joiner + urllib.parse.urlencode(query), None


class DeadMansSwitch:
    """Pings ``url`` after every watcher check: success when it completed (whatever alerts it
    raised; those reach the channels), fail when the check itself raised."""

    def __init__(
        self, url: str, fmt: PingFormat | str = PingFormat.HEALTHCHECKS, *, timeout: float = 10.0
    ) -> None:
        if not url.startswith(("https://", "http://")):
            raise ConfigurationError("heartbeat URL must start with https:// or http://")
        register_secret(url)  # the URL embeds the check's key
        self.url = url
        self.format = ping_format(fmt)
        self.timeout = timeout
        self.failures = 0
        self.log = get_logger("watcher")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DeadMansSwitch | None:
        environ = os.environ if env is None else env
        url = environ.get(HEARTBEAT_URL_ENV, "").strip()
        if not url:
            return None
        fmt = environ.get(HEARTBEAT_FORMAT_ENV, PingFormat.HEALTHCHECKS.value)
        return cls(url, ping_format(fmt, HEARTBEAT_FORMAT_ENV))

    def ping(self, state: PingState, message: str = "") -> None:
        """One ping; raises :class:`DeliveryError` (used by ``notify test``)."""
        target, body = ping_request(self.url, self.format, state, message)
        send(target, body, timeout=self.timeout, headers={"Content-Type": "text/plain"})

    def after_check(
        self, watcher: Watcher, report: Report | None, error: BaseException | None
    ) -> None:
        if error is None and report is not None:
            state = PingState.SUCCESS
            message = (
                f"ok: {len(report.jobs) + report.unread} job(s), "
                f"{len(report.active)} active alert(s)"
            )
        else:
            state = PingState.FAIL
            message = "watcher check failed: " + (snippet(error) if error else "no report")
        try:
            self.ping(state, message)
        except DeliveryError as exc:
            self.failures += 1
            self.log.error(
                "dead-man's-switch ping failed: %s",
                exc,
                extra={"event": "watcher.ping_failed", "state": state.value},
            )


class StoreHeartbeat:
    """Records checks in the ``_watcher`` status record: ``last_check_at``, ``last_check_ok``,
    ``last_check_error``, ``last_check_alerts``, ``last_check_jobs`` and ``last_check_host``:
    plain fields, so the write is blind on every store (no counter: Table Storage would read
    the record to increment it).

    One Merge, at most once per ``every`` (default 60 s) while checks keep succeeding: the check
    already read the previous heartbeat in its status query, so a watcher that checks every few
    seconds costs no extra write per check, and ``status`` knows the last run to within
    ``every``. A failed check, or the first success after one, is always recorded.
    """

    def __init__(self, every: timedelta = timedelta(seconds=60)) -> None:
        self.every = every

    def after_check(
        self, watcher: Watcher, report: Report | None, error: BaseException | None
    ) -> None:
        import socket

        now = watcher.clock()
        if error is None and report is not None:
            previous = report.watcher_status
            last = parse_iso(previous.get("last_check_at"))
            if previous.get("last_check_ok") and last is not None and now - last < self.every:
                return
        fields: dict[str, Any] = {
            "last_check_at": iso(now),
            "last_check_ok": error is None,
            "last_check_error": snippet(error) if error is not None else None,
            "last_check_host": f"{socket.gethostname()}:{os.getpid()}",
            WATCH_DUE: 0,  # every check reads the watcher's own record (its alert state)
        }
        if report is not None:
            fields["last_check_alerts"] = len(report.active)
            fields["last_check_jobs"] = len(report.jobs) + report.unread
        watcher.store.commit([Merge(status_key_of(WATCHER_JOB), fields)])


@dataclass(frozen=True)
class WatcherHeartbeat:
    """When the watcher last checked, and how it went (for ``status`` and ``doctor``)."""

    last_check_at: datetime
    ok: bool
    error: str | None
    active_alerts: int | None
    jobs: int | None
    host: str

    def age(self, now: datetime) -> timedelta:
        return now - self.last_check_at

    def stale(self, now: datetime, max_age: timedelta) -> bool:
        return self.age(now) > max_age

    def describe(self, now: datetime) -> str:
        """One line for ``status``: when, how long ago, the outcome and where it ran."""
        from ...model.durations import format_duration

        age = format_duration(timedelta(seconds=max(0, int(self.age(now).total_seconds()))))
        outcome = "ok" if self.ok else f"FAILED: {self.error or '?'}"
        alerts = f", {self.active_alerts} active alert(s)" if self.active_alerts else ""
        return (
            f"watcher last checked {self.last_check_at:%Y-%m-%d %H:%M:%S} UTC ({age} ago) "
            f"on {self.host}: {outcome}{alerts}"
        )


def read_watcher_heartbeat(store: Store) -> WatcherHeartbeat | None:
    """The watcher's last recorded check, or None when no watcher has recorded one."""
    record = store.get(status_key_of(WATCHER_JOB))
    data = record.data if record is not None else {}
    when = parse_iso(data.get("last_check_at"))
    if when is None:
        return None

    def _int(name: str) -> int | None:
        value = data.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return WatcherHeartbeat(
        last_check_at=when,
        ok=bool(data.get("last_check_ok")),
        error=data.get("last_check_error") or None,
        active_alerts=_int("last_check_alerts"),
        jobs=_int("last_check_jobs"),
        host=str(data.get("last_check_host") or "?"),
    )


def default_hooks(env: Mapping[str, str] | None = None) -> list[CheckHook]:
    """The store heartbeat, plus the dead-man's switch when ``$CRONWARDEN_HEARTBEAT_URL`` is set."""
    hooks: list[CheckHook] = [StoreHeartbeat()]
    switch = DeadMansSwitch.from_env(env)
    if switch is not None:
        hooks.append(switch)
    return hooks


class JobPings:
    """Per-job pings on run start, success and failure, in one of the ping formats.

    ``url`` is a template with ``{job}`` (Healthchecks.io slug URLs
    ``https://hc-ping.com/<ping-key>/{job}``, Cronitor ``…/p/<key>/{job}``), or a fixed URL
    with ``jobs`` naming the one job it monitors. Pings are sent on one background thread so a
    slow monitor never delays a run; :meth:`flush` waits for them. The engine (or
    :class:`JobPingHandler`) calls :meth:`run_started`, :meth:`run_succeeded`,
    :meth:`run_failed`.
    """

    def __init__(
        self,
        url: str,
        fmt: PingFormat | str = PingFormat.HEALTHCHECKS,
        *,
        jobs: Iterable[str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        if not url.startswith(("https://", "http://")):
            raise ConfigurationError("job_pings URL must start with https:// or http://")
        register_secret(url.split("{job}")[0])
        self.template = url
        self.format = ping_format(fmt)
        self.jobs = frozenset(jobs) if jobs is not None else None
        self.timeout = timeout
        self.failures = 0
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()
        self.log = get_logger("alert")

    def run_started(self, job: str, run_key: str = "") -> None:
        self._submit(job, PingState.START, f"{run_key} started")

    def run_succeeded(self, job: str, run_key: str = "", duration_ms: int | None = None) -> None:
        took = f" in {duration_ms} ms" if duration_ms is not None else ""
        self._submit(job, PingState.SUCCESS, f"{run_key} succeeded{took}")

    def run_failed(self, job: str, run_key: str = "", error: str = "") -> None:
        self._submit(job, PingState.FAIL, redact(f"{run_key} failed: {error}"))

    def url_for(self, job: str) -> str | None:
        if self.jobs is not None and job not in self.jobs:
            return None
        return self.template.replace("{job}", urllib.parse.quote(job, safe=""))

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for the pings sent so far."""
        with self._lock:
            pending, self._pending = self._pending, []
        for item in pending:
            item.exception(timeout=timeout)

    def close(self) -> None:
        self.flush()
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    def _submit(self, job: str, state: PingState, message: str) -> None:
        url = self.url_for(job)
        if url is None:
            return
        with self._lock:
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor

                self._executor = ThreadPoolExecutor(1, thread_name_prefix="cronwarden-pings")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._executor.submit(self._ping, job, url, state, message))

    def _ping(self, job: str, url: str, state: PingState, message: str) -> None:
        target, body = ping_request(url, self.format, state, message)
        try:
            send(target, body, timeout=self.timeout, headers={"Content-Type": "text/plain"})
        except DeliveryError as exc:
            self.failures += 1
            self.log.error(
                "%s: %s ping failed: %s",
                job,
                state.value,
                exc,
                extra={"event": "job.ping_failed", "job": job, "state": state.value},
            )


_TERMINAL_FAIL = {"run.failed", "run.dead_lettered"}


def _error_text(record: logging.LogRecord) -> str:
    """The failure's text for a ``/fail`` ping: the error itself when the record carries it
    (``run.failed``), else the engine's line, which ends with the redacted error snippet."""
    if record.exc_info and record.exc_info[1] is not None:
        return snippet(record.exc_info[1])
    return record.getMessage() or str(getattr(record, "error_type", ""))


class JobPingHandler(logging.Handler):
    """Turns the engine's ``run.started`` / ``run.completed`` / ``run.failed`` /
    ``run.dead_lettered`` log events into :class:`JobPings` calls (no engine change needed).
    Attach it to the ``cronwarden`` logger with :meth:`install`."""

    def __init__(self, pings: JobPings) -> None:
        super().__init__(logging.INFO)
        self.pings = pings

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        job = getattr(record, "job", None)
        if not isinstance(job, str) or not isinstance(event, str):
            return
        run_key = str(getattr(record, "run_key", ""))
        if event == "run.started":
            self.pings.run_started(job, run_key)
        elif event == "run.completed":
            duration = getattr(record, "duration_ms", None)
            self.pings.run_succeeded(job, run_key, duration if isinstance(duration, int) else None)
        elif event in _TERMINAL_FAIL:
            self.pings.run_failed(job, run_key, _error_text(record))

    def install(self, logger: logging.Logger | None = None) -> JobPingHandler:
        """Attach to the ``cronwarden`` logger, letting INFO events reach this handler."""
        target = logger or get_logger()
        if target.getEffectiveLevel() > logging.INFO:
            target.setLevel(logging.INFO)
        target.addHandler(self)
        return self


__all__ = [
    "CheckHook",
    "DeadMansSwitch",
    "JobPingHandler",
    "JobPings",
    "PingFormat",
    "PingState",
    "StoreHeartbeat",
    "WatcherHeartbeat",
    "default_hooks",
    "read_watcher_heartbeat",
]
