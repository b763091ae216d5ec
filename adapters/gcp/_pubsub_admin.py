"""Creating a :class:`~cronwarden.adapters.gcp.queue.PubSubQueue`'s resources (emulator, dev).

Order matters: the dead-letter topic and its subscription exist before the main subscription
points at them, so nothing the broker dead-letters can be dropped for want of a subscriber.
Subscriptions are created without an inactivity expiry (Pub/Sub's default deletes a
subscription after 31 idle days, which a quiet dead-letter subscription would hit).
In production, grant the Pub/Sub service agent publisher on the dead-letter topic and
subscriber on the subscription, or the broker cannot forward dead letters.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .queue import PubSubQueue


def subscription_policies(queue: PubSubQueue) -> dict[str, Any]:
    """The fields of the main subscription that carry the queue's retry semantics."""
    from google.protobuf import duration_pb2

    def duration(seconds: float) -> Any:
        whole = int(seconds)
        return duration_pb2.Duration(seconds=whole, nanos=int((seconds - whole) * 1e9))

    policies: dict[str, Any] = {
        "ack_deadline_seconds": queue.ack_deadline,
        "dead_letter_policy": {
            "dead_letter_topic": queue.dead_letter_topic,
            "max_delivery_attempts": queue.max_deliveries,
        },
    }
    if queue.push_endpoint is not None:
        policies["push_config"] = {"push_endpoint": queue.push_endpoint}
    if queue.retry_backoff is not None:
        low, high = queue.retry_backoff
        policies["retry_policy"] = {
            "minimum_backoff": duration(low),
            "maximum_backoff": duration(high),
        }
    return policies


def ensure_resources(queue: PubSubQueue, publisher: Any, subscriber: Any) -> None:
    """Create what is missing; align an existing subscription's policies with ``queue``."""
    from google.api_core import exceptions as gexc
    from google.protobuf import field_mask_pb2

    for topic in (queue.dead_letter_topic, queue.topic):
        with contextlib.suppress(gexc.AlreadyExists):
            publisher.create_topic(name=topic)
    never_expire: dict[str, Any] = {"expiration_policy": {}}
    with contextlib.suppress(gexc.AlreadyExists):
        subscriber.create_subscription(
            request={
                "name": queue.dead_letter_subscription,
                "topic": queue.dead_letter_topic,
                "ack_deadline_seconds": 60,
                **never_expire,
            }
        )
    policies = subscription_policies(queue)
    try:
        subscriber.create_subscription(
            request={
                "name": queue.subscription,
                "topic": queue.topic,
                **policies,
                **never_expire,
            }
        )
    except gexc.AlreadyExists:
        mask = field_mask_pb2.FieldMask(
            paths=list(policies) + ([] if "retry_policy" in policies else ["retry_policy"])
        )
        subscriber.update_subscription(
            request={
                "subscription": {"name": queue.subscription, "topic": queue.topic, **policies},
                "update_mask": mask,
            }
        )
