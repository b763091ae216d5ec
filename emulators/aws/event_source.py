"""A local stand-in for Lambda's SQS event source mapping (moto cannot invoke Lambda without
Docker): receive from SQS, call the handler in-process with the exact SQS event shape, delete
what the partial batch response does not list as failed.

As Lambda does: a handler that raises leaves the whole batch on the queue; a response naming a
message id that was not in the batch counts as a failure of the whole batch; records keep their
visibility timeout (the queue's, or ``visibility``) and come back counted by
``ApproximateReceiveCount``, so the queue's redrive policy applies.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[[Any, Any], Any]


@dataclass
class LambdaContext:
    """What a handler may read from Lambda's context object."""

    function_name: str = "cronwarden-local"
    timeout: float = 900.0
    started: float = field(default_factory=time.monotonic)
    aws_request_id: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout - (time.monotonic() - self.started)) * 1000))


def sqs_record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """One record of Lambda's SQS event, from a ``ReceiveMessage`` result."""
    attributes = {str(k): str(v) for k, v in (message.get("Attributes") or {}).items()}
    message_attributes = {
        name: {
            "stringValue": value.get("StringValue"),
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value.get("DataType", "String"),
        }
        for name, value in (message.get("MessageAttributes") or {}).items()
    }
    body = str(message["Body"])
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),  # noqa: S324
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


class EventSourceHost:
    """Polls ``queue_url`` with ``sqs`` (a boto3 client) and invokes ``handler`` per batch."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: Handler,
        *,
        batch_size: int = 1,
        visibility: int | None = None,
        function_timeout: float = 900.0,
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.handler = handler
        self.batch_size = batch_size
        self.visibility = visibility
        self.function_timeout = function_timeout
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
        self.queue_arn = attrs["Attributes"]["QueueArn"]
        self.region = self.queue_arn.split(":")[3]
        self.invocations = 0
        self.deleted = 0
        self.failed = 0

    def poll(self, wait: float = 1.0) -> int:
        """One receive and, if anything came, one invocation; returns the batch size."""
        request: dict[str, Any] = {
            "QueueUrl": self.queue_url,
            "MaxNumberOfMessages": self.batch_size,
            "WaitTimeSeconds": int(min(20, max(0.0, wait))),
            "MessageSystemAttributeNames": ["All"],
            "MessageAttributeNames": ["All"],
        }
        if self.visibility is not None:
            request["VisibilityTimeout"] = self.visibility
        messages = self.sqs.receive_message(**request).get("Messages", [])
        if not messages:
            return 0
        event = {"Records": [sqs_record(m, self.queue_arn, self.region) for m in messages]}
        self.invocations += 1
        try:
            response = self.handler(event, LambdaContext(timeout=self.function_timeout))
        except Exception:
            self.failed += len(messages)  # the whole batch stays
            return len(messages)
        failed = _failed_ids(response, {m["MessageId"] for m in messages})
        for message in messages:
            if message["MessageId"] in failed:
                self.failed += 1
                continue
            self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
            self.deleted += 1
        return len(messages)

    def run_until(self, predicate: Callable[[], bool], *, deadline: float = 60.0) -> None:
        """Poll until ``predicate()`` holds; AssertionError at the deadline."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if predicate():
                return
            self.poll(wait=1.0)
        if not predicate():
            raise AssertionError("event source host: condition not met within the deadline")

    def serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.poll(wait=1.0)


def _failed_ids(response: Any, batch: set[str]) -> set[str]:
    """The message ids to keep; Lambda treats a malformed response as all failed."""
    if response is None:
        return set()
    if not isinstance(response, Mapping):
        return batch
    items = response.get("batchItemFailures")
    if items is None:
        return set()
    if not isinstance(items, list):
        return batch
    ids: set[str] = set()
    for item in items:
        identifier = item.get("itemIdentifier") if isinstance(item, Mapping) else None
        if not identifier or identifier not in batch:
            return batch
        ids.add(str(identifier))
    return ids


__all__ = ["EventSourceHost", "LambdaContext", "sqs_record"]
