"""The dashboard's window and job actions — resolve, rerun, pause, resume — each through the
same function as its CLI twin (``dlq resolve``, ``trigger --rerun``, ``pause``, ``resume``)
and logged with the same event, ``actor`` naming the dashboard (``dashboard:api`` /
``dashboard:form``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..jobs import pause as paused
from ..jobs.definitions import Job, JobSet
from ..model.logs import get_logger
from ..model.ports import Store
from .views import BadRequest, NotFound

#: the actions this module serves, by their URL name
NAMES = ("resolve", "rerun", "pause", "resume")
#: the body fields each action takes; any other is refused (a misspelt field, or one the API
#: does not offer, would otherwise be dropped without a word)
FIELDS = {
    "resolve": ("job", "window", "reason"),
    "rerun": ("job", "window"),
    "pause": ("job", "reason", "until", "replace"),
    "resume": ("job",),
}


@dataclass(frozen=True)
class _Runner:
    """What :func:`cronwarden.ops.manual.enqueue_by_hand` reads of a runner."""

    store: Store
    queue: Any
    engine: Any


@dataclass(frozen=True)
class _Clock:
    now: Callable[[], datetime]


def _job(jobs: JobSet, body: Mapping[str, Any]) -> Job:
    name = body.get("job")
    if not isinstance(name, str) or not name:
        raise BadRequest("job is required")
    job = jobs.get(name)
    if job is None:
        raise NotFound(f"unknown job {name!r}")
    return job


def _text(body: Mapping[str, Any], name: str, *, required: bool) -> str:
    value = body.get(name)
    text = value.strip() if isinstance(value, str) else ""
    if required and not text:
        raise BadRequest(f"{name} is required")
    return text


def _window(job: Job, body: Mapping[str, Any], now: datetime) -> datetime:
    from ..hosting.trigger import WindowRefused, check_window
    from ..model.schedule import parse_instant

    text = _text(body, "window", required=True)
    try:
        return check_window(job, parse_instant(text), now)
    except (ValueError, WindowRefused) as exc:
        raise BadRequest(str(exc)) from None


def _until(body: Mapping[str, Any]) -> datetime | None:
    """A pause's ``until`` (an ISO time; none: until resumed)."""
    from ..model.schedule import parse_instant

    value = body.get("until")
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest("until must be an ISO time like 2026-01-20T02:00Z")
    try:
        return parse_instant(value)
    except ValueError as exc:
        raise BadRequest(f"until: {exc}") from None


def _flag(body: Mapping[str, Any], name: str) -> bool:
    """A yes/no field: JSON true/false, or a form's "true"/"false" (absent: false)."""
    value = body.get(name, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "on", ""):
        return value.lower() in ("true", "on")
    raise BadRequest(f"{name} must be true or false")


def _dropped_letters(store: Store, queue: Any, job: Job, window: datetime) -> str:
    """Remove the broker's dead letters of a window just resolved (as ``dlq resolve`` does:
    a redrive of them would be acknowledged unrun, and they keep the queue-wide alert on);
    what happened, as a sentence to append. The resolve stands whatever this says."""
    from ..ops.windows import drop_resolved_letters

    if queue is None or not callable(getattr(queue, "dlq_remove", None)):
        return ""
    try:
        dropped = drop_resolved_letters(store, queue, job, window)
    except Exception as exc:  # recorded already; the leftover letter is named, not hidden
        get_logger("ops").warning(
            "the dead letter(s) of %s %s were not removed: %s",
            job.name, window, type(exc).__name__,
            extra={"event": "window.letters_kept", "job": job.name},
        )  # fmt: skip
        return "; its dead letter(s) stay in the dead-letter queue (not removed)"
    return f"; removed {dropped} dead letter(s) of it" if dropped else ""


def perform(
    name: str,
    body: Mapping[str, Any],
    *,
    jobs: JobSet,
    store: Store,
    queue: Any,
    now: Callable[[], datetime],
    actor: str,
) -> dict[str, Any]:
    """Run action ``name`` with ``body``'s fields; the JSON answer. Raises :class:`BadRequest`
    for a refused action (the message says why) and :class:`NotFound` for an unknown job."""
    log = get_logger("ops")
    unknown = sorted(str(field) for field in body if field not in FIELDS.get(name, ()))
    if unknown:
        raise BadRequest(
            f"{name} takes {', '.join(FIELDS[name])}; unknown field(s): {', '.join(unknown)}"
        )
    job = _job(jobs, body)
    at = now()
    if name == "pause":
        try:
            view = paused.pause(
                store,
                job.name,
                reason=_text(body, "reason", required=True),
                by=actor,
                now=at,
                until=_until(body),
                replace=_flag(body, "replace"),
            )
        except ValueError as exc:  # paused already (AlreadyPaused), an end not ahead
            raise BadRequest(str(exc)) from None
        log.info(
            "%s %s", job.name, view.describe(),
            extra={"event": "job.paused", "job": job.name, "actor": actor},
        )  # fmt: skip
        return {"job": job.name, "paused": True, "text": view.describe()}
    if name == "resume":
        ended = paused.resume(store, job.name, by=actor, now=at)
        if ended is None:
            return {"job": job.name, "paused": False, "text": f"{job.name} was not paused"}
        log.info(
            "%s resumed", job.name,
            extra={"event": "job.resumed", "job": job.name, "actor": actor},
        )  # fmt: skip
        return {"job": job.name, "paused": False, "text": f"resumed (was {ended.describe()})"}
    window = _window(job, body, at)
    if name == "resolve":
        from ..ops.windows import WindowActionRefused, resolve_window

        reason = _text(body, "reason", required=True)
        try:
            run = resolve_window(store, job, window, reason, actor=actor, now=at)
        except WindowActionRefused as exc:
            raise BadRequest(str(exc)) from None
        log.info(
            "resolved %s", run.run_key,
            extra={"event": "window.resolved", "job": job.name, "actor": actor},
        )  # fmt: skip
        text = (run.excused_detail or "") + _dropped_letters(store, queue, job, window)
        return {"run_key": run.run_key, "state": "excused", "text": text}
    if name == "rerun":
        from ..ops.manual import enqueue_by_hand

        if queue is None or not callable(getattr(queue, "publish", None)):
            raise BadRequest("this dashboard has no queue to publish to")
        told = enqueue_by_hand(_Runner(store, queue, _Clock(now)), job, window, rerun=True)
        log.info(
            "%s", told.line,
            extra={"event": "window.rerun", "job": job.name, "actor": actor},
        )  # fmt: skip
        return {"run_key": told.run_key, "text": told.line}
    raise NotFound(f"no action {name!r}")
