"""SQS implementation of the :class:`~cronwarden.model.ports.Queue` port.

A standard queue plus a dead-letter queue named in the queue's redrive policy, whose
``maxReceiveCount`` is :attr:`SqsQueue.max_deliveries`: SQS itself moves a message received that
many times without deletion to the DLQ (``capabilities.max_deliveries``).

* ``publish`` → ``SendMessage``. SQS standard queues do not deduplicate (``dedup=False``: the
  store's claim does). ``DelaySeconds`` is at most 900 s (``capabilities.max_delay``); a longer
  delay is chained here too: the message carries ``cw-not-before`` and a receive that finds it
  early sends it again with the remaining delay (at most 900 s per hop) instead of returning it.
* ``receive`` → ``ReceiveMessage`` (at most 10 per call, long polls of at most 20 s);
  ``attempt`` is ``ApproximateReceiveCount``. ``ack`` → ``DeleteMessage``; ``retry(delay)`` and
  ``extend`` → ``ChangeMessageVisibility`` (at most 12 h after the receive).
* ``dead_letter`` → ``SendMessage`` to the DLQ carrying ``cw-dead-letter-reason`` /
  ``cw-dead-letter-description`` message attributes, then ``DeleteMessage`` (a crash between the
  two leaves a copy in both: redelivered, never lost). Messages SQS moved itself carry no reason:
  they read back as ``MaxReceiveCountExceeded``.
* ``dlq_depth`` → ``ApproximateNumberOfMessages`` + ``…NotVisible`` of the DLQ; ``dlq_peek``
  receives and makes the messages visible again at once; ``redrive(limit)`` is receive + send +
  delete (``StartMessageMoveTask`` moves everything and is not capped; moto lacks it too).

Bodies that are valid SQS text go as they are (what EventBridge Scheduler and people send);
other bytes go base64-encoded with ``cw-body-encoding: base64``. SQS allows 10 message
attributes with non-empty values: when the attributes do not fit, they travel as one JSON
attribute ``cw-attributes``.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import REDRIVE_ATTRIBUTE, DeadLetter, Delivery, Queue, QueueCapabilities

from ._clients import client
from .errors import error_code
from .settings import AwsSettings

if TYPE_CHECKING:
    from cronwarden.ops.doctor import DeadLetterPolicy

MAX_DELAY = 900  #: SQS DelaySeconds limit
MAX_VISIBILITY = 43200  #: 12 hours: the longest a received message can stay invisible
MAX_BATCH = 10
MAX_WAIT = 20
MAX_ATTRIBUTES = 10
REASON = "cw-dead-letter-reason"
DESCRIPTION = "cw-dead-letter-description"
ENCODING = "cw-body-encoding"
NOT_BEFORE = "cw-not-before"
PACKED = "cw-attributes"
BROKER_REASON = "MaxReceiveCountExceeded"
_SYSTEM = frozenset({REASON, DESCRIPTION, ENCODING, NOT_BEFORE, PACKED})
_NAME = re.compile(r"^(?!aws\.|amazon\.)[A-Za-z0-9_.-]{1,256}$", re.IGNORECASE)
_TEXT = re.compile("^[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*$")
_DESCRIPTION_MAX = 4096
_RETENTION = 1209600  #: 14 days


class SqsQueue(Queue):
    """Run requests on SQS (see the module docstring).

    ``sqs`` is a boto3 SQS client; ``queue_url`` / ``dead_letter_url`` the two queues;
    ``max_deliveries`` must equal the redrive policy's ``maxReceiveCount``. Use
    :meth:`from_settings`, which also creates both queues when ``create_missing`` is set.
    """

    deduplicates = False  #: standard queues deliver every copy; the store's claim dedupes

    def __init__(
        self, sqs: Any, queue_url: str, dead_letter_url: str, *, max_deliveries: int = 10
    ) -> None:
        self._sqs = sqs
        self.queue_url = queue_url
        self.dead_letter_url = dead_letter_url
        self.max_deliveries = max_deliveries
        self.capabilities = QueueCapabilities(
            dedup=False, max_deliveries=max_deliveries, max_delay=MAX_DELAY
        )

    @property
    def client(self) -> Any:
        """The boto3 SQS client (local hosts receive raw messages with it)."""
        return self._sqs

    @classmethod
    def from_settings(cls, settings: AwsSettings) -> SqsQueue:
        # a long poll holds the response up to MAX_WAIT seconds: the read timeout must cover it
        sqs = client("sqs", settings, read_timeout=settings.read_timeout + MAX_WAIT)
        if settings.create_missing:
            dlq_url, queue_url = create_queues(
                sqs, settings.queue, settings.dead_letter_queue_name, settings.max_receive_count
            )
        else:
            queue_url = settings.queue_url or _url_of(sqs, settings.queue)
            dlq_url = settings.dead_letter_queue_url or _url_of(
                sqs, settings.dead_letter_queue_name
            )
        return cls(sqs, queue_url, dlq_url, max_deliveries=settings.max_receive_count)

    # -- Publisher ---------------------------------------------------------------------------
    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        system: dict[str, str] = {}
        delay = max(0.0, delay)
        if delay > MAX_DELAY:
            system[NOT_BEFORE] = f"{time.time() + delay:.3f}"
        self._send(self.queue_url, body, dict(attributes or {}), system, delay)

    def _send(
        self,
        url: str,
        body: bytes,
        attributes: Mapping[str, str],
        system: Mapping[str, str],
        delay: float = 0.0,
    ) -> None:
        text, encoded = encode_body(body)
        extra = dict(system)
        if encoded:
            extra[ENCODING] = "base64"
        request: dict[str, Any] = {
            "QueueUrl": url,
            "MessageBody": text,
            "MessageAttributes": encode_attributes(attributes, extra),
        }
        seconds = min(MAX_DELAY, math.ceil(delay))
        if seconds:
            request["DelaySeconds"] = seconds
        self._sqs.send_message(**request)

    # -- Consumer ----------------------------------------------------------------------------
    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            messages = self._receive(
                self.queue_url, min(MAX_BATCH, max(1, max_messages)), visibility, remaining
            )
            out = [d for d in map(self._delivery, messages) if d is not None]
            if out or time.monotonic() >= deadline:
                return out

    def _receive(
        self, url: str, count: int, visibility: float, wait: float
    ) -> list[dict[str, Any]]:
        response = self._sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=count,
            VisibilityTimeout=min(MAX_VISIBILITY, math.ceil(max(0.0, visibility))),
            WaitTimeSeconds=min(MAX_WAIT, math.ceil(wait)),
            MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
            MessageAttributeNames=["All"],
        )
        messages: list[dict[str, Any]] = response.get("Messages", [])
        return messages

    def _delivery(self, message: Mapping[str, Any]) -> Delivery | None:
        delivery = delivery_of_message(message)
        not_before = delivery.__dict__.get("_not_before")
        if not_before is not None and not_before > time.time() + 1:
            # a chained postponement: send the next hop, then drop this copy
            self._send(
                self.queue_url,
                delivery.body,
                delivery.attributes,
                {NOT_BEFORE: f"{not_before:.3f}"},
                not_before - time.time(),
            )
            self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=delivery.handle)
            return None
        return delivery

    def ack(self, delivery: Delivery) -> None:
        self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=delivery.handle)

    def retry(self, delivery: Delivery, delay: float) -> None:
        self._visibility(delivery, delay)

    def extend(self, delivery: Delivery, visibility: float) -> None:
        self._visibility(delivery, visibility)

    def _visibility(self, delivery: Delivery, seconds: float) -> None:
        received = delivery.__dict__.get("_received_at", time.time())
        ceiling = max(0, int(MAX_VISIBILITY - (time.time() - received)) - 1)
        self._sqs.change_message_visibility(
            QueueUrl=self.queue_url,
            ReceiptHandle=delivery.handle,
            VisibilityTimeout=min(ceiling, math.ceil(max(0.0, seconds))),
        )

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        self.send_dead_letter(delivery.body, delivery.attributes, reason, description)
        self.ack(delivery)

    def send_dead_letter(
        self, body: bytes, attributes: Mapping[str, str], reason: str, description: str = ""
    ) -> None:
        """Put ``body`` on the DLQ with the reason as message attributes (hosts whose platform
        deletes the original, like the Lambda worker, call this alone)."""
        system = {REASON: reason or "DeadLettered"}
        if description:
            system[DESCRIPTION] = description[:_DESCRIPTION_MAX]
        self._send(self.dead_letter_url, body, attributes, system)

    # -- DeadLetters -------------------------------------------------------------------------
    def dead_letter_policy(self) -> DeadLetterPolicy:
        """For ``cronwarden doctor``: the run queue's redrive policy as SQS holds it (not as
        configured here), and whether its target is the dead-letter queue this provider reads.
        Needs ``sqs:GetQueueAttributes`` on both queues."""
        from cronwarden.ops.doctor import DeadLetterPolicy

        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["RedrivePolicy"]
        ).get("Attributes", {})
        raw = attributes.get("RedrivePolicy")
        if not raw:
            return DeadLetterPolicy(False, None, f"{self.queue_url} has no redrive policy")
        policy = json.loads(raw)
        target = str(policy.get("deadLetterTargetArn") or "")
        try:
            dlq_arn = self._sqs.get_queue_attributes(
                QueueUrl=self.dead_letter_url, AttributeNames=["QueueArn"]
            )["Attributes"]["QueueArn"]
        except self._sqs.exceptions.QueueDoesNotExist:
            return DeadLetterPolicy(False, None, f"dead-letter queue {self.dead_letter_url}")
        if target != dlq_arn:
            return DeadLetterPolicy(
                False, None, f"redrive target {target or '?'} is not {dlq_arn} (read by cronwarden)"
            )
        limit = int(policy.get("maxReceiveCount") or 0) or None
        return DeadLetterPolicy(True, limit, f"{self.queue_url} -> {target}")

    def dlq_depth(self) -> int:
        response = self._sqs.get_queue_attributes(
            QueueUrl=self.dead_letter_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )
        attrs = response.get("Attributes", {})
        return int(attrs.get("ApproximateNumberOfMessages", 0)) + int(
            attrs.get("ApproximateNumberOfMessagesNotVisible", 0)
        )

    def _take_dead(self, limit: int, visibility: float) -> list[dict[str, Any]]:
        taken: list[dict[str, Any]] = []
        while len(taken) < limit:
            batch = self._receive(
                self.dead_letter_url, min(MAX_BATCH, limit - len(taken)), visibility, 0.0
            )
            if not batch:
                break
            taken.extend(batch)
        return taken

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        taken = self._take_dead(limit, 30.0)
        try:
            return [dead_letter_of(m) for m in taken]
        finally:
            for message in taken:  # visible again: a peek consumes nothing
                self._sqs.change_message_visibility(
                    QueueUrl=self.dead_letter_url,
                    ReceiptHandle=message["ReceiptHandle"],
                    VisibilityTimeout=0,
                )

    def redrive(self, limit: int = 10) -> int:
        if limit < 1:
            raise ValueError("redrive limit must be at least 1")
        moved = 0
        for message in self._take_dead(limit, 60.0):
            dead = delivery_of_message(message)
            attributes = dict(dead.attributes)
            try:
                generation = int(attributes.get(REDRIVE_ATTRIBUTE, "0"))
            except ValueError:
                generation = 0
            attributes[REDRIVE_ATTRIBUTE] = str(generation + 1)
            self._send(self.queue_url, dead.body, attributes, {})
            self._sqs.delete_message(
                QueueUrl=self.dead_letter_url, ReceiptHandle=message["ReceiptHandle"]
            )
            moved += 1
        return moved

    def dlq_remove(self, message_ids: Sequence[str]) -> int:
        """Delete the dead letters with these message ids (as :meth:`dlq_peek` gives them);
        every other letter received on the way is made visible again at once."""
        wanted = set(message_ids)
        if not wanted:
            return 0
        removed = 0
        for message in self._take_dead(max(len(wanted), self.dlq_depth()) + MAX_BATCH, 60.0):
            handle = message["ReceiptHandle"]
            if dead_letter_of(message).message_id in wanted:
                self._sqs.delete_message(QueueUrl=self.dead_letter_url, ReceiptHandle=handle)
                removed += 1
            else:
                self._sqs.change_message_visibility(
                    QueueUrl=self.dead_letter_url, ReceiptHandle=handle, VisibilityTimeout=0
                )
        return removed

    def close(self) -> None:
        self._sqs.close()


# -- codecs -------------------------------------------------------------------------------------
def encode_body(body: bytes) -> tuple[str, bool]:
    """``(text, base64?)``: the body as SQS text when it is valid text, else base64."""
    try:
        text = bytes(body).decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text and _TEXT.match(text):
        return text, False
    # SQS refuses an empty body: the empty body travels as "=" (no base64 text decodes to it)
    return base64.b64encode(bytes(body)).decode("ascii") or "=", True


def encode_attributes(
    attributes: Mapping[str, str], system: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    plain = {str(k): str(v) for k, v in attributes.items()}
    fits = len(plain) + len(system) <= MAX_ATTRIBUTES and all(
        _NAME.match(k) and v and _TEXT.match(v) and k not in _SYSTEM for k, v in plain.items()
    )
    out = {} if fits else {PACKED: json.dumps(plain, ensure_ascii=False)}
    if fits:
        out.update(plain)
    out.update(system)
    return {k: {"DataType": "String", "StringValue": v} for k, v in out.items()}


def decode_attributes(raw: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """``(public, system)`` attributes of an SQS message (API or Lambda event shape)."""
    values: dict[str, str] = {}
    for name, value in (raw or {}).items():
        text = value.get("StringValue", value.get("stringValue"))
        if text is not None:
            values[str(name)] = str(text)
    public = {k: v for k, v in values.items() if k not in _SYSTEM}
    if PACKED in values:
        public.update({str(k): str(v) for k, v in json.loads(values[PACKED]).items()})
    system = {k: v for k, v in values.items() if k in _SYSTEM}
    return public, system


def decode_body(text: str, system: Mapping[str, str]) -> bytes:
    if system.get(ENCODING) == "base64":
        return b"" if text == "=" else base64.b64decode(text)
    return text.encode("utf-8")


def delivery_of_message(message: Mapping[str, Any]) -> Delivery:
    """A :class:`Delivery` of a ``ReceiveMessage`` result, or of one record of a Lambda SQS
    event (``messageId``, ``receiptHandle``, ``body``, ``attributes``, ``messageAttributes``)."""
    lambda_shape = "messageId" in message
    sys_attrs = message.get("attributes" if lambda_shape else "Attributes") or {}
    public, system = decode_attributes(
        message.get("messageAttributes" if lambda_shape else "MessageAttributes") or {}
    )
    sent = sys_attrs.get("SentTimestamp")
    delivery = Delivery(
        message_id=str(message["messageId" if lambda_shape else "MessageId"]),
        body=decode_body(str(message["body" if lambda_shape else "Body"]), system),
        attributes=public,
        attempt=int(sys_attrs.get("ApproximateReceiveCount") or 1),
        handle=message["receiptHandle" if lambda_shape else "ReceiptHandle"],
        enqueued_at=datetime.fromtimestamp(int(sent) / 1000, UTC) if sent else None,
    )
    delivery.__dict__["_received_at"] = time.time()
    if NOT_BEFORE in system:
        delivery.__dict__["_not_before"] = float(system[NOT_BEFORE])
    return delivery


def dead_letter_of(message: Mapping[str, Any]) -> DeadLetter:
    delivery = delivery_of_message(message)
    _, system = decode_attributes(message.get("MessageAttributes") or {})
    reason = system.get(REASON)
    return DeadLetter(
        message_id=delivery.message_id,
        body=delivery.body,
        attributes=delivery.attributes,
        reason=reason or BROKER_REASON,
        description=system.get(DESCRIPTION, "")
        if reason
        else "SQS moved it after maxReceiveCount receives without deletion",
        attempts=delivery.attempt,
        dead_lettered_at=delivery.enqueued_at,
    )


# -- queues -------------------------------------------------------------------------------------
def _url_of(sqs: Any, name: str) -> str:
    try:
        return str(sqs.get_queue_url(QueueName=name)["QueueUrl"])
    except Exception as exc:
        if "NonExistentQueue" in error_code(exc) or "QueueDoesNotExist" in error_code(exc):
            raise ConfigurationError(
                f"SQS queue {name!r} does not exist (deploy it, or set "
                "CRONWARDEN_AWS_CREATE_MISSING=true locally)"
            ) from None
        raise


def create_queues(
    sqs: Any, name: str, dead_letter_name: str, max_receive_count: int, *, visibility: int = 60
) -> tuple[str, str]:
    """Create the DLQ and the queue (redrive policy, 14-day retention) unless they exist;
    returns ``(dlq_url, queue_url)``. Production queues come from Terraform."""
    retention = {"MessageRetentionPeriod": str(_RETENTION)}
    dlq_url = str(sqs.create_queue(QueueName=dead_letter_name, Attributes=retention)["QueueUrl"])
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count})
    queue_url = str(
        sqs.create_queue(
            QueueName=name,
            Attributes={
                **retention,
                "VisibilityTimeout": str(visibility),
                "RedrivePolicy": policy,
            },
        )["QueueUrl"]
    )
    return dlq_url, queue_url


__all__ = [
    "BROKER_REASON",
    "DESCRIPTION",
    "MAX_DELAY",
    "REASON",
    "SqsQueue",
    "create_queues",
    "dead_letter_of",
    "delivery_of_message",
    "encode_body",
]
