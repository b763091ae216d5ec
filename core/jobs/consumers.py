"""Event-keyed consumers: a job that runs once per *event key* instead of once per window.

::

    @cronwarden.consumer("invoice-render", key=lambda e: e["invoice_id"], max_runtime="5m",
                         schema={"type": "object", "required": ["invoice_id"]})
    def render(ctx: cronwarden.RunContext) -> None:
        invoice = ctx.payload          # the event
        ...

    cronwarden.publish("invoice-render", {"invoice_id": "inv-42"}, publisher=queue)

The run key comes from the event, never from anything made in the handler: ``key(event)`` is
computed at publish, carried in the request, and computed again at receive (a request whose key
does not match its event is malformed). The run key is ``<consumer>:<slot>`` where the *slot* —
the place a scheduled job's window takes in run keys and store keys — is ``e:<key>`` for keys of
store-safe characters (``[A-Za-z0-9._~=+@-]``, at most 100) and ``h:<sha-256 of the key>`` for any
other key (store keys cannot hold ``/``, ``#``, ``?``, control characters, or be long). Slots
never look like a window (windows start with a digit). So fifty copies of one event are one run:
the claim dedupes them exactly as it dedupes redeliveries of one window.

This module is the declaration, validation and wire format; the worker runs a consumer's
request through the engine like any run (``RunRequest.slot``); see ``docs/events.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..model.durations import DurationLike, format_duration, parse_duration
from ..model.errors import InvalidJobDefinition, MalformedRunRequest
from ..model.redaction import redact
from ..model.runs import MAX_REQUEST_BYTES
from ..model.schedule import utc
from .policies import _NAME, Handler, Overlap, Retry, _owner, _tags
from .top_level import check_held, note

if TYPE_CHECKING:
    from ..model.ports import Publisher

__all__ = [
    "EVENT_REQUEST_VERSION",
    "EventConsumer",
    "EventRate",
    "EventRequest",
    "MalformedEvent",
    "consumer",
    "consumers_in",
    "decode_event_request",
    "event_slot",
    "publish",
]

EVENT_REQUEST_VERSION = 1
MAX_EVENT_KEY_CHARS = 512
_SAFE_KEY = re.compile(r"^[A-Za-z0-9._~=+@-]{1,100}\Z")  # `\Z`: `$` matches before a final "\n"


class MalformedEvent(MalformedRunRequest):
    """An event that can never be run: not JSON, no key, a key of the wrong type, or not valid
    against the consumer's schema. At publish it is raised to the caller; at receive the request
    is dead-lettered with this message as the reason (a subclass of
    :class:`~cronwarden.model.errors.MalformedRunRequest`, which workers already dead-letter)."""


@dataclass(frozen=True)
class EventRate:
    """Liveness for a consumer: at least ``count`` events per ``per`` (else ``missed``)."""

    count: int
    per: timedelta

    @classmethod
    def of(cls, value: tuple[int, DurationLike] | EventRate, name: str) -> EventRate:
        if isinstance(value, EventRate):
            return value
        try:
            count, per = value
        except (TypeError, ValueError) as exc:
            raise InvalidJobDefinition(
                f"{name}: at_least must be (count, interval), e.g. (1, '1h'), got {value!r}"
            ) from exc
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidJobDefinition(f"{name}: at_least count must be a positive integer")
        interval = parse_duration(per, field=f"{name}: at_least interval")
        if interval <= timedelta(0):
            raise InvalidJobDefinition(f"{name}: at_least interval must be positive")
        return cls(count, interval)

    def __str__(self) -> str:
        return f"at least {self.count} per {format_duration(self.per)}"


@dataclass(frozen=True)
class EventConsumer:
    """A consumer declared with :func:`consumer`. Runs under the same claim, lease, ledger,
    retries, dead-lettering and overlap policy as a scheduled job; overlap is per event key."""

    name: str
    handler: Handler
    key: Callable[[Any], Any]
    max_runtime: timedelta
    overlap: Overlap = Overlap.SKIP
    retry: Retry = field(default_factory=Retry)
    schema: Mapping[str, Any] | None = None
    at_least: EventRate | None = None
    description: str = ""
    owner: str = ""
    tags: tuple[str, ...] = ()

    def __call__(self, ctx: Any) -> Any:
        return self.handler(ctx)

    def key_of(self, event: Any) -> str:
        """The event's key as text; :class:`MalformedEvent` when the key function fails or
        returns something that is not a non-empty string or an integer."""
        try:
            value = self.key(event)
        except Exception as exc:
            raise MalformedEvent(
                f"{self.name}: the key function failed on the event: "
                f"{redact(f'{type(exc).__name__}: {exc}')}"
            ) from exc
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise MalformedEvent(
                f"{self.name}: the event key must be text or an integer, got {type(value).__name__}"
            )
        text = str(value)
        if not text or len(text) > MAX_EVENT_KEY_CHARS:
            raise MalformedEvent(
                f"{self.name}: the event key must be 1-{MAX_EVENT_KEY_CHARS} characters, "
                f"got {len(text)}"
            )
        return text

    def check(self, event: Any) -> str:
        """Validate ``event`` (JSON, size, schema, key) and return its key."""
        try:
            encoded = json.dumps(event, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise MalformedEvent(f"{self.name}: the event is not JSON: {exc}") from exc
        if len(encoded.encode()) > MAX_REQUEST_BYTES - 1024:
            raise MalformedEvent(
                f"{self.name}: the event is {len(encoded.encode())} bytes; events carry ids, "
                f"not documents (limit {MAX_REQUEST_BYTES - 1024})"
            )
        if self.schema is not None:
            _check_schema(self.name, self.schema, event)
        return self.key_of(event)

    def request(self, event: Any, *, published_at: datetime | None = None) -> EventRequest:
        key = self.check(event)
        return EventRequest(self.name, key, event, published_at or datetime.now(UTC))


def consumer(
    name: str,
    *,
    key: Callable[[Any], Any] | str,
    max_runtime: DurationLike,
    overlap: Overlap | str = Overlap.SKIP,
    retry: Retry | None = None,
    schema: Mapping[str, Any] | None = None,
    at_least: tuple[int, DurationLike] | EventRate | None = None,
    owner: str | None = None,
    tags: Iterable[str] | None = None,
    description: str | None = None,
) -> Callable[[Handler], EventConsumer]:
    """Declare a consumer of the events published under ``name``. Checked here, at import.

    ``key``: a function of the event, or the name of a top-level field, giving the event's
    identity (``"invoice_id"``): one successful run per key, ever (within the store's
    retention). ``schema``: a JSON Schema document the event must satisfy, checked at publish and
    at receive (needs the ``jsonschema`` package). ``overlap``: what a second event with the
    *same key* does while the first runs (events of different keys run side by side).
    ``at_least``: ``(count, interval)`` for the watcher: fewer events than that is ``missed``.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidJobDefinition(
            f"consumer name {name!r}: use 1-63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    key_function = _key_function(name, key)
    runtime = parse_duration(max_runtime, field=f"{name}: max_runtime")
    if runtime <= timedelta(0):
        raise InvalidJobDefinition(f"{name}: max_runtime must be positive, got {max_runtime!r}")
    try:
        overlap_policy = Overlap(overlap)
    except ValueError as exc:
        choices = ", ".join(o.value for o in Overlap)
        raise InvalidJobDefinition(
            f"{name}: overlap must be one of {choices}, got {overlap!r}"
        ) from exc
    if retry is not None and not isinstance(retry, Retry):
        raise InvalidJobDefinition(
            f"{name}: retry must be a cronwarden.Retry (e.g. Retry(max_attempts=5)), got {retry!r}"
        )
    if schema is not None:
        _check_schema_document(name, schema)
    rate = None if at_least is None else EventRate.of(at_least, name)
    owner_text, tag_tuple = _owner(name, owner), _tags(name, tags)

    def decorate(handler: Handler) -> EventConsumer:
        if not callable(handler):
            raise InvalidJobDefinition(f"{name}: the handler must be callable")
        declared = EventConsumer(
            name=name,
            handler=handler,
            key=key_function,
            max_runtime=runtime,
            overlap=overlap_policy,
            retry=retry or Retry(),
            schema=schema,
            at_least=rate,
            description=(description or (handler.__doc__ or "").strip().split("\n")[0])[:500],
            owner=owner_text,
            tags=tag_tuple,
        )
        _DECLARED[name] = declared  # for publish(name, ...) in this process (the latest wins)
        note("consumer", name, declared, sys._getframe(1))
        return declared

    return decorate


def _key_function(name: str, key: object) -> Callable[[Any], Any]:
    if isinstance(key, str):
        if not key:
            raise InvalidJobDefinition(f"{name}: key must name a field of the event")
        field_name = key

        def by_field(event: Any) -> Any:
            if not isinstance(event, Mapping) or field_name not in event:
                raise KeyError(f"the event has no field {field_name!r}")
            return event[field_name]

        return by_field
    if not callable(key):
        raise InvalidJobDefinition(
            f"{name}: key must be a function of the event or a field name, got {key!r}"
        )
    return key


def _jsonschema(name: str) -> Any:
    try:
        # imported by name: only consumers with a schema need it, and it ships no type stubs
        return importlib.import_module("jsonschema")
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InvalidJobDefinition(
            f"{name}: schema= needs the jsonschema package (pip install 'cronwarden[events]')"
        ) from exc


def _check_schema_document(name: str, schema: Mapping[str, Any]) -> None:
    jsonschema = _jsonschema(name)
    if not isinstance(schema, Mapping):
        raise InvalidJobDefinition(f"{name}: schema must be a JSON Schema object")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidJobDefinition(
            f"{name}: schema is not a valid JSON Schema: {exc.message}"
        ) from exc
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise InvalidJobDefinition(f"{name}: schema is not JSON: {exc}") from exc


def _check_schema(name: str, schema: Mapping[str, Any], event: Any) -> None:
    jsonschema = _jsonschema(name)
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(event))
    if error is not None:
        where = "$" + "".join(f"[{p!r}]" for p in error.absolute_path)
        raise MalformedEvent(
            f"{name}: the event does not match the schema at {where}: {redact(error.message)}"
        )


def event_slot(key: str) -> str:
    """The slot of an event key in run keys and store keys (see the module docstring)."""
    if _SAFE_KEY.match(key):
        return f"e:{key}"
    return "h:" + hashlib.sha256(key.encode()).hexdigest()[:40]


@dataclass(frozen=True)
class EventRequest:
    """What :func:`publish` enqueues for a consumer. Serialised as a small JSON object."""

    consumer: str
    key: str
    event: Any
    published_at: datetime

    @property
    def slot(self) -> str:
        return event_slot(self.key)

    @property
    def run_key(self) -> str:
        return f"{self.consumer}:{self.slot}"

    def to_json(self) -> bytes:
        body = {
            "v": EVENT_REQUEST_VERSION,
            "kind": "event",
            "consumer": self.consumer,
            "key": self.key,
            "run_key": self.run_key,
            "event": self.event,
            "published_at": utc(self.published_at).isoformat(),
        }
        return json.dumps(body, separators=(",", ":")).encode()


def decode_event_request(raw: bytes | str, consumers: Mapping[str, EventConsumer]) -> EventRequest:
    """Parse and check a received event request against its consumer: the schema again (a
    publisher may have skipped it, or the schema changed), and the key computed again from the
    event. Raises :class:`MalformedEvent` (dead-letter with the message as the reason)."""
    if isinstance(raw, bytes | bytearray | memoryview):
        if len(raw) > MAX_REQUEST_BYTES:
            raise MalformedEvent(f"event request is {len(raw)} bytes, over the limit")
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedEvent("event request is not UTF-8 text") from exc
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MalformedEvent(f"event request is not JSON: {exc.msg}") from exc
    if not isinstance(body, dict) or body.get("kind") != "event":
        raise MalformedEvent('not an event request (no "kind": "event")')
    if body.get("v") != EVENT_REQUEST_VERSION:
        raise MalformedEvent(f"unsupported event request version {body.get('v')!r}")
    name = body.get("consumer")
    target = consumers.get(name) if isinstance(name, str) else None
    if target is None:
        known = ", ".join(sorted(consumers)) or "none"
        raise MalformedEvent(f"unknown consumer {name!r} (known: {known})")
    if "event" not in body:
        raise MalformedEvent(f"{name}: the request carries no event")
    key = target.check(body["event"])
    if body.get("key") != key:
        raise MalformedEvent(
            f"{name}: the request's key {body.get('key')!r} is not the key of its event "
            f"{key!r}: the key comes from the event"
        )
    try:
        published = datetime.fromisoformat(str(body.get("published_at")))
    except ValueError as exc:
        raise MalformedEvent(f"{name}: published_at is not an ISO time") from exc
    if published.tzinfo is None:
        raise MalformedEvent(f"{name}: published_at has no timezone")
    request = EventRequest(target.name, key, body["event"], published)
    if body.get("run_key") != request.run_key:
        raise MalformedEvent(f"{name}: run_key {body.get('run_key')!r} does not match the event")
    return request


_DECLARED: dict[str, EventConsumer] = {}  #: every consumer declared in this process, by name
_PUBLISHER: list[Publisher] = []  #: the provider's queue, made on the first publish by name
_GUARD = threading.Lock()


def publish(
    target: EventConsumer | str,
    event: Any,
    *,
    publisher: Publisher | None = None,
    delay: float = 0.0,
) -> str:
    """Check ``event`` against ``target`` (schema, key) and enqueue it; return its run key.

    ``target``: the consumer, or its name (a consumer declared in this process, else one of
    the job module ``$CRONWARDEN_JOBS``). ``publisher``: default, the queue of the provider
    ``$CRONWARDEN_PROVIDER`` names (made once per process). The broker's deduplication id is
    the run key and the event's fingerprint (:func:`event_dedup_id`), so brokers that
    deduplicate drop copies, the claim makes the rest harmless, and a different event under
    the same key reaches the claim (``PayloadMismatch``). A malformed event raises
    :class:`MalformedEvent` here, before anything is sent; an unknown consumer name raises
    :class:`~cronwarden.model.errors.ConfigurationError`."""
    if isinstance(target, str):
        target = _resolve(target)
    if publisher is None:
        publisher = _default_publisher()
    request = target.request(event)
    publisher.publish(
        request.to_json(),
        attributes={"consumer": target.name, "run_key": request.run_key, "kind": "event"},
        dedup_id=event_dedup_id(request.run_key, event),
        delay=delay,
    )
    return request.run_key


#: the longest deduplication id every broker takes (Service Bus ``MessageId``, SQS: 128)
MAX_DEDUP_ID = 128


def event_dedup_id(run_key: str, event: Any) -> str:
    """The broker's deduplication id of ``event`` under ``run_key``: the run key and the
    event's fingerprint, so a broker drops copies of one event, never a *different* event
    under the same key (that one must reach the claim, which dead-letters it as
    ``PayloadMismatch``: dropping it at the broker would lose it without a word). Hashed
    when longer than :data:`MAX_DEDUP_ID`."""
    from ..model.runs import fingerprint

    dedup = f"{run_key}#{fingerprint(event)[:16]}"
    if len(dedup) <= MAX_DEDUP_ID:
        return dedup
    return "h#" + hashlib.sha256(dedup.encode("utf-8", "surrogatepass")).hexdigest()


def _resolve(name: str) -> EventConsumer:
    found = _DECLARED.get(name)
    if found is not None:
        return found
    from ..model.environment import JOBS_ENV
    from ..model.errors import ConfigurationError

    target = os.environ.get(JOBS_ENV, "").strip()
    if target:
        from .loading import load_module

        found = consumers_in(load_module(target)).get(name)
        if found is not None:
            return found
    known = ", ".join(sorted(_DECLARED)) or "none"
    raise ConfigurationError(
        f"no consumer named {name!r} is declared in this process"
        f"{f' or in ${JOBS_ENV} ({target})' if target else ''} (known: {known})"
    )


def _default_publisher() -> Publisher:
    with _GUARD:
        if not _PUBLISHER:
            from .loading import provider_from_env

            _PUBLISHER.append(provider_from_env().queue())
        return _PUBLISHER[0]


def consumers_in(module: ModuleType) -> dict[str, EventConsumer]:
    """Every :class:`EventConsumer` bound at the top level of ``module``, by name."""
    found: dict[str, EventConsumer] = {}
    for value in vars(module).values():
        if isinstance(value, EventConsumer):
            if value.name in found and found[value.name] is not value:
                raise InvalidJobDefinition(f"two different consumers are named {value.name!r}")
            found[value.name] = value
    check_held(module, "consumer", found.values())
    return found
