"""The run model: run keys, run ids, states and the run request that travels on a queue."""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .errors import MalformedRunRequest
from .schedule import utc

WINDOW_FORMAT = "%Y-%m-%dT%H:%MZ"
REQUEST_VERSION = 1
MAX_REQUEST_BYTES = 64 * 1024


class RunState(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  #: retryable: the next delivery takes the run over
    DEAD_LETTERED = "dead_lettered"
    #: the window is accounted for without running: a scheduled fire skipped by the job's
    #: declared overlap policy, a dead letter an operator resolved, or (later) a paused job;
    #: the run record's ``excused`` field says which
    EXCUSED = "excused"

    @property
    def terminal(self) -> bool:
        return self in (RunState.SUCCEEDED, RunState.DEAD_LETTERED, RunState.EXCUSED)

    @property
    def settled(self) -> bool:
        """The window needs nothing more: it succeeded or is excused (a dead letter is
        terminal for the queue but stays open, alerted, until redriven or resolved)."""
        return self in (RunState.SUCCEEDED, RunState.EXCUSED)


def format_window(window: datetime) -> str:
    """The UTC window as it appears in run keys; sorts chronologically as text."""
    return _format_window(window)


# Cached: one run formats its window a dozen times (run key, records, log fields), and equal
# datetimes (the same instant, whatever their zone) have the same text. Errors are not cached.
@functools.lru_cache(maxsize=4096)
def _format_window(window: datetime) -> str:
    value = utc(window)
    if value.second or value.microsecond:
        raise ValueError(f"window {value.isoformat()} is not on a minute boundary")
    # WINDOW_FORMAT, with the year zero-padded (``strftime("%Y")`` gives ``999`` on glibc, a
    # text ``parse_window`` refuses and that does not sort among the others)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}Z"
    )


def parse_window(text: str) -> datetime:
    try:
        return _parse_window(text)
    except (TypeError, ValueError) as exc:
        raise MalformedRunRequest(f"window {text!r} is not of the form 2026-01-20T02:00Z") from exc


@functools.lru_cache(maxsize=4096)
def _parse_window(text: str) -> datetime:
    """``strptime`` (a tenth of a run's parsing), cached: a datetime is immutable."""
    return datetime.strptime(text, WINDOW_FORMAT).replace(tzinfo=UTC)


def run_key(job: str, window: datetime) -> str:
    """``job:window``: the identity of one scheduled execution, the same for every redelivery."""
    return f"{job}:{format_window(window)}"


def new_run_id(now: datetime | None = None) -> str:
    """A run id for one attempt: sortable timestamp plus a short random suffix."""
    stamp = utc(now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%f")[:-3]
    return f"{stamp}-{secrets.token_hex(3)}"


#: a memory address in a default ``repr`` (``<Customer object at 0x7f…>``): differs per process
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")


def _stable(value: Any) -> Any:
    """What a value JSON cannot encode stands for in a fingerprint: its ``str`` (a datetime,
    a Decimal, a dataclass's repr), unless that holds a memory address; then its content (a
    dataclass's fields, else its ``vars`` and ``__slots__`` values, encoded the same way), or,
    with no content, its type's name: never the address, which changes on every attempt."""
    text = str(value)
    if _ADDRESS.search(text) is None:
        return text
    content: dict[str, Any] = {}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        content = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    else:
        content = dict(getattr(value, "__dict__", None) or {})
        for klass in type(value).__mro__:
            slots = klass.__dict__.get("__slots__", ())
            for slot in (slots,) if isinstance(slots, str) else slots:
                if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                    content.setdefault(slot, getattr(value, slot))
    if content:
        return {str(name): item for name, item in content.items()}
    kind = type(value)
    return f"<{kind.__module__}.{kind.__qualname__}>"


_FINGERPRINT_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_stable)


def fingerprint(value: Any) -> str:
    """A stable digest of JSON-serialisable input (key order does not matter).

    The digest of ``json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)``
    (``repr`` when that fails, memory addresses left out); ints and plain ASCII text take a
    shortcut to the same text. A value whose ``str`` holds a memory address (a plain object)
    stands for its content instead (see :func:`_stable`), the same on every attempt.
    """
    kind = type(value)
    if kind is dict and not value:  # a scheduled run's payload: no input
        return _EMPTY_FINGERPRINT
    if kind is int:
        text = int.__repr__(value)
    elif (
        kind is str
        and value.isascii()
        and value.isprintable()
        and '"' not in value
        and "\\" not in value
    ):
        text = f'"{value}"'
    else:
        try:
            text = _FINGERPRINT_JSON.encode(value)
        except (TypeError, ValueError):  # e.g. a circular reference
            text = _ADDRESS.sub("", repr(value))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_EMPTY_FINGERPRINT = hashlib.sha256(b"{}").hexdigest()[:32]


@dataclass(frozen=True)
class RunRequest:
    """What the trigger enqueues and the worker consumes. Serialised as a small JSON object."""

    job: str
    window: datetime
    reason: str = "schedule"  #: schedule | catch_up | manual | backfill
    payload: dict[str, Any] = field(default_factory=dict)
    requested_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: the run key's slot when it is not the window (an event consumer's ``e:<key>``; see
    #: :mod:`cronwarden.jobs.consumers`); ``None`` for scheduled and dependent jobs
    slot: str | None = None

    @property
    def slot_text(self) -> str:
        """What follows ``job:`` in the run key: the slot, else the window's text."""
        return self.slot if self.slot is not None else format_window(self.window)

    @property
    def run_key(self) -> str:
        return f"{self.job}:{self.slot_text}"

    def to_json(self) -> bytes:
        body = {
            "v": REQUEST_VERSION,
            "job": self.job,
            "window": format_window(self.window),
            "run_key": self.run_key,
            "reason": self.reason,
            "payload": self.payload,
            "requested_at": utc(self.requested_at).isoformat(),
        }
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> RunRequest:
        """Parse and validate; raises :class:`MalformedRunRequest` with the reason."""
        if isinstance(raw, bytes | bytearray | memoryview):
            raw = bytes(raw)
            if len(raw) > MAX_REQUEST_BYTES:
                raise MalformedRunRequest(f"run request is {len(raw)} bytes, over the limit")
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MalformedRunRequest("run request is not UTF-8 text") from exc
        if len(raw) > MAX_REQUEST_BYTES:
            raise MalformedRunRequest(f"run request is {len(raw)} characters, over the limit")
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise MalformedRunRequest(f"run request is not JSON: {exc.msg}") from exc
        if not isinstance(body, dict):
            raise MalformedRunRequest("run request must be a JSON object")
        if body.get("v") != REQUEST_VERSION:
            raise MalformedRunRequest(f"unsupported run request version {body.get('v')!r}")
        for name in ("job", "window"):
            if not isinstance(body.get(name), str):
                raise MalformedRunRequest(f"run request field {name!r} is missing or not text")
        payload = body.get("payload", {})
        if not isinstance(payload, dict):
            raise MalformedRunRequest("run request field 'payload' must be an object")
        reason = body.get("reason", "schedule")
        if not isinstance(reason, str):
            raise MalformedRunRequest("run request field 'reason' must be text")
        window = parse_window(body["window"])
        request = cls(job=body["job"], window=window, reason=reason, payload=payload)
        if "run_key" in body and body["run_key"] != request.run_key:
            raise MalformedRunRequest(f"run_key {body['run_key']!r} does not match job and window")
        return request


def request_attributes(request: RunRequest) -> dict[str, str]:
    """The message attributes that carry ``request`` beside its body (every publisher of a run
    request sets them: the trigger, a dependency's outbox, a run by hand)."""
    return {
        "job": request.job,
        "window": format_window(request.window),
        "run_key": request.run_key,
        "reason": request.reason,
    }
