"""Measuring a Service Bus queue's delivery limit with data-plane rights only (for
``cronwarden doctor``): ``MaxDeliveryCount`` is readable only through the management API
(ARM / ATOM, Manage rights), so doctor sends a probe message and abandons it until the broker
dead-letters it, counting the deliveries, then completes it in ``$DeadLetterQueue``.

Other messages received meanwhile are held (their locks kept, not abandoned) and abandoned
once at the end: each gains one delivery count, never enough to be dead-lettered by the
measurement. A running worker may take the probe first (workers acknowledge probes): then the
limit cannot be measured and the result says so.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from typing import TYPE_CHECKING, Any

from cronwarden.watch.probe import PROBE_ATTRIBUTE

if TYPE_CHECKING:
    from cronwarden.ops.doctor import DeadLetterPolicy

    from .servicebus import ServiceBusQueue


def _props(message: Any) -> dict[str, str]:
    raw = message.application_properties or {}
    out: dict[str, str] = {}
    for key, value in raw.items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        out[name] = value.decode() if isinstance(value, bytes) else str(value)
    return out


def measure_delivery_limit(queue: ServiceBusQueue, *, timeout: float = 60.0) -> DeadLetterPolicy:
    from cronwarden.ops.doctor import DeadLetterPolicy

    marker = f"dlq:{secrets.token_hex(8)}"
    queue.send(json.dumps({"cronwarden_probe": marker}).encode(), {PROBE_ATTRIBUTE: marker})
    deliveries, held = 0, []
    end = time.monotonic() + timeout
    where = f"queue {queue.queue_name}"
    try:
        with queue._recv_lock:
            receiver = queue._get_receiver()
            while time.monotonic() < end:
                batch = receiver.receive_messages(max_message_count=10, max_wait_time=1.0)
                mine = [m for m in batch if _props(m).get(PROBE_ATTRIBUTE) == marker]
                held += [m for m in batch if _props(m).get(PROBE_ATTRIBUTE) != marker]
                for message in mine:
                    deliveries += 1
                    receiver.abandon_message(message)
                if not mine and deliveries and _take_dead_probe(queue, marker):
                    return DeadLetterPolicy(
                        True,
                        deliveries,
                        f"{where} (measured: dead-lettered after {deliveries} deliveries)",
                    )
    finally:
        with queue._recv_lock:
            for message in held:
                # a lapsed lock raises: the broker redelivers that message anyway
                with contextlib.suppress(Exception):
                    queue._get_receiver().abandon_message(message)
    if deliveries == 0:
        return DeadLetterPolicy(True, None, f"{where}: a running worker took the probe")
    return DeadLetterPolicy(
        False,
        None,
        f"{where}: the probe was abandoned {deliveries} times and never reached $DeadLetterQueue",
    )


def _take_dead_probe(queue: ServiceBusQueue, marker: str) -> bool:
    with queue._dlq_lock:
        receiver = queue._get_dlq()
        batch = receiver.receive_messages(max_message_count=50, max_wait_time=1.0)
        found = False
        for message in batch:
            if _props(message).get(PROBE_ATTRIBUTE) == marker:
                receiver.complete_message(message)
                found = True
            else:
                receiver.abandon_message(message)
        return found
