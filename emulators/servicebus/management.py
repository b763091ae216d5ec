"""Request/response nodes: ``$cbs`` (put-token) and ``<entity>/$management`` operations.

Each handler takes the decoded request (a ``proton.Message``) and returns the response message.
Contract: a handler never raises for a bad request; it answers with a ``statusCode`` (and, for
management errors, ``errorCondition``) the way Service Bus does, so the SDK maps it to the same
exception class as in production.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from proton import UNDESCRIBED, Array, Data, Message, symbol, timestamp

from . import codec
from .auth import SasValidator
from .broker import Broker, BrokerError, SubQueue

log = logging.getLogger(__name__)

MGMT_SUFFIX = "/$management"
_UNDESCRIBED: Any = UNDESCRIBED
_NOT_FOUND = (
    "The messaging entity '{entity}' could not be found. "
    "To know more visit https://aka.ms/sbResourceMgrExceptions."
)


def entity_path(address: str) -> str:
    """``amqps://host:port/q/$DeadLetterQueue`` → ``q/$DeadLetterQueue``; plain paths as-is."""
    if "://" in address:
        address = urlparse(address).path
    return address.strip("/")


def _elements(value: Any) -> list[Any]:
    """An AMQP array (proton ``Array``) or list as a Python list."""
    if isinstance(value, Array):
        return list(value.elements)
    if isinstance(value, (list, tuple)):
        return list(value)
    if value is None:
        return []
    return [value]


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(str(value))


def cbs_response(broker: Broker, request: Message, validator: SasValidator) -> Message:
    """Answer a CBS ``put-token``: 200; 401 when ``validator`` refuses the token (wrong key,
    expired, not a SAS token); 404 when the token's audience names no entity. Tokens are never
    logged."""
    props: dict[Any, Any] = request.properties or {}
    operation = props.get("operation")
    audience = str(props.get("name") or "")
    status, description = 200, "OK"
    refusal = None
    if operation == "put-token":
        refusal = validator.check(request.body, audience)
    if operation != "put-token":
        status, description = 400, f"unsupported CBS operation {operation!r}"
    elif refusal is not None:
        status, description = 401, refusal
        log.info("put-token for %s refused: %s", audience, refusal)
    else:
        path = entity_path(audience)
        if path.endswith(MGMT_SUFFIX):
            path = path[: -len(MGMT_SUFFIX)]
        if path and broker.resolve(path) is None:
            status, description = 404, _NOT_FOUND.format(entity=audience)
        log.debug("put-token for %s -> %s", audience, status)
    return Message(
        correlation_id=request.id,
        properties={"status-code": status, "status-description": description},
    )


def _ok(request: Message, body: dict[str, Any] | None = None, status: int = 200) -> Message:
    return Message(
        correlation_id=request.id,
        properties={"statusCode": status, "statusDescription": "OK"},
        body=body if body is not None else {},
    )


def _error(request: Message, status: int, condition: str, description: str) -> Message:
    return Message(
        correlation_id=request.id,
        properties={
            "statusCode": status,
            "statusDescription": description,
            "errorCondition": symbol(condition),
        },
        body={},
    )


def management_response(broker: Broker, path: str, request: Message) -> Message:
    """Answer one ``<path>/$management`` request."""
    sub = broker.resolve(path)
    props: dict[Any, Any] = request.properties or {}
    operation = str(props.get("operation") or "")
    if sub is None:
        return _error(request, 404, "amqp:not-found", _NOT_FOUND.format(entity=path))
    handler = _OPERATIONS.get(operation)
    if handler is None:
        return _error(
            request, 501, "amqp:not-implemented", f"Operation {operation!r} is not supported."
        )
    body = request.body if isinstance(request.body, dict) else {}
    try:
        return handler(broker, sub, request, body)
    except BrokerError as exc:
        return _error(request, exc.status, exc.condition, exc.description)
    except (KeyError, TypeError, ValueError, codec.CodecError) as exc:
        return _error(request, 400, "com.microsoft:argument-error", f"Bad request: {exc}")


def _renew_lock(broker: Broker, sub: SubQueue, request: Message, body: dict[str, Any]) -> Message:
    tokens = [_uuid(t) for t in _elements(body["lock-tokens"])]
    expiries = [timestamp(int(broker.renew(sub, t) * 1000)) for t in tokens]
    return _ok(request, {"expirations": Array(_UNDESCRIBED, Data.TIMESTAMP, *expiries)})


def _peek(broker: Broker, sub: SubQueue, request: Message, body: dict[str, Any]) -> Message:
    start = int(body.get("from-sequence-number") or 1)
    count = int(body.get("message-count") or 1)
    found = broker.peek(sub, start, count)
    if not found:
        return _ok(request, {}, status=204)
    return _ok(request, {"messages": [{"message": m.render()} for m in found]})


def _receive_deferred(
    broker: Broker, sub: SubQueue, request: Message, body: dict[str, Any]
) -> Message:
    seqs = [int(s) for s in _elements(body["sequence-numbers"])]
    # receiver-settle-mode: 0 = first (receive-and-delete), 1 = second (peek-lock)
    peek_lock = int(body.get("receiver-settle-mode", 1)) != 0
    got = broker.receive_deferred(sub, seqs, peek_lock=peek_lock)
    messages: list[dict[str, Any]] = []
    for msg, raw in got:
        entry: dict[str, Any] = {"message": raw}
        if msg.lock_token is not None:
            entry["lock-token"] = msg.lock_token
        messages.append(entry)
    return _ok(request, {"messages": messages})


def _update_disposition(
    broker: Broker, sub: SubQueue, request: Message, body: dict[str, Any]
) -> Message:
    status = str(body["disposition-status"])
    tokens = [_uuid(t) for t in _elements(body["lock-tokens"])]
    for token in tokens:
        if status == "completed":
            broker.complete(sub, token)
        elif status == "abandoned":
            broker.abandon(sub, token)
        elif status == "defered":
            broker.defer(sub, token)
        elif status == "suspended":
            broker.dead_letter(
                sub,
                token,
                body.get("deadletter-reason") or None,
                body.get("deadletter-description") or None,
            )
        else:
            raise BrokerError(
                "com.microsoft:argument-error", f"Unknown disposition-status {status!r}."
            )
    return _ok(request)


def _schedule(broker: Broker, sub: SubQueue, request: Message, body: dict[str, Any]) -> Message:
    if sub.dead_letter:
        raise BrokerError("amqp:not-allowed", "Cannot schedule messages on a dead-letter queue.")
    seqs = [broker.schedule(sub, bytes(entry["message"])) for entry in _elements(body["messages"])]
    return _ok(request, {"sequence-numbers": Array(_UNDESCRIBED, Data.LONG, *seqs)})


def _cancel(broker: Broker, sub: SubQueue, request: Message, body: dict[str, Any]) -> Message:
    broker.cancel_scheduled(sub, [int(s) for s in _elements(body["sequence-numbers"])])
    return _ok(request)


_Operation = Callable[[Broker, SubQueue, Message, dict[str, Any]], Message]
_OPERATIONS: dict[str, _Operation] = {
    "com.microsoft:renew-lock": _renew_lock,
    "com.microsoft:peek-message": _peek,
    "com.microsoft:receive-by-sequence-number": _receive_deferred,
    "com.microsoft:update-disposition": _update_disposition,
    "com.microsoft:schedule-message": _schedule,
    "com.microsoft:cancel-scheduled-message": _cancel,
}
