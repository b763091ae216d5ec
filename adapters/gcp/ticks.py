"""Schedule ticks: what Cloud Scheduler sends, as ``(job, fired_at)`` for the core trigger.

Two shapes arrive at the trigger function:

* **Pub/Sub push** (the rendered deployment: Cloud Scheduler → schedule topic → push
  subscription): the envelope's message carries ``{"job": "<name>"}`` as data and/or the ``job``
  attribute. ``fired_at`` is the message's ``publishTime``: Cloud Scheduler publishes at the
  fire time, a redelivered push keeps it, and a double fire publishes twice within moments, so
  all of them floor to the same window (the core trigger floors to the job's schedule).
* **Plain HTTP POST** (a Cloud Scheduler HTTP target) with a JSON body ``{"job": "<name>"}``;
  ``fired_at`` is the ``X-CloudScheduler-ScheduleTime`` header Cloud Scheduler adds (the
  scheduled time, identical on its retries), else the body's ``"time"``, else the arrival time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cronwarden.model.ports import Delivery

from .push import MalformedEnvelope, _parse_time, parse_envelope

SCHEDULE_TIME_HEADER = "X-CloudScheduler-ScheduleTime"


class MalformedTick(ValueError):
    """The tick names no job, or its body is not what Cloud Scheduler sends."""


@dataclass(frozen=True)
class Tick:
    job: str
    fired_at: datetime
    delivery: Delivery | None = None  #: set when the tick came as a Pub/Sub push


def _job_from(body: bytes, attributes: Mapping[str, str]) -> str:
    name = attributes.get("job")
    if body.strip():
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            data = None
        if isinstance(data, Mapping) and isinstance(data.get("job"), str):
            if name is not None and name != data["job"]:
                raise MalformedTick(
                    f"tick names two jobs: attribute {name!r}, body {data['job']!r}"
                )
            name = data["job"]
        elif name is None:
            raise MalformedTick('tick body is not a JSON object with "job"')
    if not name:
        raise MalformedTick('tick names no job (data {"job": ...} or attribute "job")')
    return name


def is_push(body: Any) -> bool:
    return isinstance(body, Mapping) and "message" in body


def parse_tick(
    raw: bytes, headers: Mapping[str, str], *, now: datetime | None = None
) -> tuple[Tick | None, Delivery | None, str]:
    """``(tick, delivery, error)``: the tick, or ``None`` and why not.

    ``delivery`` is the push delivery when the request was a Pub/Sub push (even when its
    message is a bad tick: the caller dead-letters it). ``delivery`` is ``None`` and ``error``
    set when the request is neither a push envelope nor a JSON tick (answer 400).
    """
    try:
        body = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError):
        return None, None, "request body is not JSON"
    if is_push(body):
        try:
            delivery = parse_envelope(body)
        except MalformedEnvelope as exc:
            return None, None, str(exc)
        published = delivery.enqueued_at
        if published is None:
            return None, delivery, "push message has no valid publishTime"
        try:
            job = _job_from(delivery.body, delivery.attributes)
        except MalformedTick as exc:
            return None, delivery, str(exc)
        return Tick(job, published.astimezone(UTC), delivery), delivery, ""
    if not isinstance(body, Mapping):
        return None, None, 'tick body must be a JSON object like {"job": "<name>"}'
    named = body.get("job")
    if not isinstance(named, str) or not named:
        return None, None, 'tick body names no job ({"job": "<name>"})'
    header = next((v for k, v in headers.items() if k.lower() == SCHEDULE_TIME_HEADER.lower()), "")
    fired = _parse_time(header) or _parse_time(body.get("time"))
    if (header or body.get("time")) and fired is None:
        return None, None, "the tick's schedule time is not an RFC 3339 time with a zone"
    return Tick(named, (fired or now or datetime.now(UTC)).astimezone(UTC)), None, ""


__all__ = ["SCHEDULE_TIME_HEADER", "MalformedTick", "Tick", "parse_tick"]
