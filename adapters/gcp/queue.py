"""Pub/Sub implementation of the :class:`~cronwarden.model.ports.Queue` port.

Resources (one subscription per topic: redrive re-publishes to the topic)::

    topic  ──► subscription  (ackDeadline, retryPolicy, deadLetterPolicy(max 5..100) ──►)
    dead-letter topic ──► dead-letter subscription   (read by dlq_depth / dlq_peek / redrive)

How each part of the contract maps onto Pub/Sub:

* ``receive`` is a synchronous pull with ``return_immediately``, polled with a growing interval
  until ``wait`` runs out (a plain sync pull on an empty subscription blocks ~29 s, and a pull
  cut off by a client deadline can swallow messages until their ack deadline passes, costing a
  delivery attempt). Visibility is the ack deadline, set per delivery with ``ModifyAckDeadline``
  unless it equals the subscription's. One call reaches at most 600 s; a longer visibility
  (``receive`` or ``extend``) is kept up by a background thread that re-extends the delivery
  every 200 s until it is settled or the time has passed (see ``_keeper``). ``attempt`` is
  Pub/Sub's ``delivery_attempt``, filled because every subscription has a dead-letter policy.
* ``retry(delay)`` sets the ack deadline to ``delay`` (0 = nack); the subscription's retryPolicy
  backoff adds to it (the emulator's backoff is coarse, about 2 s steps). ``extend`` sets it too.
* ``dead_letter(reason)`` publishes the message to the dead-letter topic with
  ``cw-dead-letter-reason`` (and description, attempts, original id) attributes, then acks it:
  subscribers have no dead-letter call. The broker's own dead-lettering after
  ``max_deliveries`` adds ``CloudPubSubDeadLetterSource*`` attributes; it reads back as reason
  ``MaxDeliveryAttemptsExceeded``.
* ``dlq_depth`` / ``dlq_peek`` pull the dead-letter subscription and release what they pulled
  (ack deadline 0), consuming nothing. That is exact on the emulator and for one caller at a
  time; in production, alert on the Cloud Monitoring metric
  ``pubsub.googleapis.com/subscription/num_undelivered_messages`` of the dead-letter
  subscription instead. ``redrive(limit)`` pulls at most ``limit``, re-publishes them to the
  topic with ``cw-redrive`` incremented (dead-letter bookkeeping attributes removed), then acks.
* ``publish(dedup_id=...)``: Pub/Sub has no publish-side deduplication (``deduplicates`` is
  False); the id travels as ``cw-dedup-id`` and the store's claim dedupes for real.
  ``publish(delay=...)``: the message carries ``cw-not-before``; a receive that pulls it early
  hides it again until then (each hide is a broker delivery, so it counts toward
  ``max_deliveries``: about one per 10 minutes of delay).
* Settling a delivery whose ack id is no longer valid (its visibility ran out and another
  receiver has it) is ignored, as on the other backends.

Clients are the plain GAPIC clients (no background batching threads), created on first use;
``google`` packages are imported only then.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import (
    REASON_ATTRIBUTE,
    REDRIVE_ATTRIBUTE,
    DeadLetter,
    Delivery,
    Queue,
    QueueCapabilities,
)

from ._clients import grpc_module, pubsub_clients
from ._keeper import DeadlineKeeper

if TYPE_CHECKING:
    from cronwarden.ops.doctor import DeadLetterPolicy

log = logging.getLogger(__name__)

MIN_DELIVERIES = 5  #: Pub/Sub's bounds on deadLetterPolicy.maxDeliveryAttempts
MAX_DELIVERIES = 100
MAX_ACK_DEADLINE = 600  #: seconds; Pub/Sub's cap on an ack deadline
MAX_BACKOFF = 600.0

DESCRIPTION_ATTRIBUTE = "cw-dead-letter-description"
ATTEMPTS_ATTRIBUTE = "cw-dead-letter-attempts"
ORIGINAL_ID_ATTRIBUTE = "cw-message-id"
DEDUP_ATTRIBUTE = "cw-dedup-id"
NOT_BEFORE_ATTRIBUTE = "cw-not-before"  #: epoch seconds before which a message is hidden
SOURCE_PREFIX = "CloudPubSubDeadLetterSource"  #: attributes the broker adds when it dead-letters
BROKER_REASON = "MaxDeliveryAttemptsExceeded"
_BOOKKEEPING = {REASON_ATTRIBUTE, DESCRIPTION_ATTRIBUTE, ATTEMPTS_ATTRIBUTE, ORIGINAL_ID_ATTRIBUTE}
_ATTRIBUTE_VALUE_BYTES = 1024
_CHUNK = 500  #: ack ids per acknowledge/modify call, messages per publish call


_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._~+%-]{2,254}")


def _full(project: str, kind: str, name: str) -> str:
    """``projects/P/<kind>/<name>``; refuses names Pub/Sub would reject (3-255 characters,
    starting with a letter, letters/digits/``-_.~+%``, not starting with ``goog``)."""
    short = name.rsplit("/", 1)[-1]
    if not _NAME.fullmatch(short) or short.startswith("goog"):
        raise ConfigurationError(
            f"invalid Pub/Sub {kind[:-1]} name {short!r}: use 3-255 characters, starting with "
            "a letter: letters, digits and - _ . ~ + % (not starting with 'goog')"
        )
    return name if name.startswith("projects/") else f"projects/{project}/{kind}/{name}"


def _clip(text: str, limit: int = _ATTRIBUTE_VALUE_BYTES) -> str:
    raw = text.encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _number(text: str | None, default: float) -> float:
    """An attribute as a number; a missing or garbled value (not ours to trust) is ``default``."""
    try:
        return float(text) if text is not None else default
    except ValueError:
        return default


def _seconds(value: float, low: int, cap: float = MAX_ACK_DEADLINE) -> int:
    return max(low, min(int(cap), math.ceil(value)))


def validate_max_deliveries(value: int) -> int:
    """``value`` if Pub/Sub accepts it as maxDeliveryAttempts, else ConfigurationError."""
    if not MIN_DELIVERIES <= value <= MAX_DELIVERIES:
        raise ConfigurationError(
            f"Pub/Sub dead-letter policies allow {MIN_DELIVERIES} to {MAX_DELIVERIES} delivery "
            f"attempts, got {value}; set the job's retry policy within that range"
        )
    return value


class PubSubQueue(Queue):
    """A Pub/Sub topic and subscription with a dead-letter topic and subscription.

    ``topic``/``subscription`` (and the dead-letter names, default ``<topic>-dead-letter`` and
    ``<subscription>-dead-letter``) are ids or full resource paths. ``max_deliveries`` (5..100)
    is the subscription's deadLetterPolicy; ``ack_deadline`` (10..600 s) its default
    visibility; ``retry_backoff`` its retryPolicy ``(minimum, maximum)`` seconds, or ``None``
    for immediate redelivery. ``create_missing`` creates absent resources (and aligns an
    existing subscription's policies) on first use: for emulators and development; production
    resources come from the deployment. ``credentials``: an object or a zero-argument factory
    (default: Application Default Credentials). Thread-safe.
    """

    deduplicates = False  #: Pub/Sub publishes every copy; the store's claim dedupes

    def __init__(
        self,
        project: str,
        topic: str,
        subscription: str,
        *,
        dead_letter_topic: str | None = None,
        dead_letter_subscription: str | None = None,
        max_deliveries: int = MIN_DELIVERIES,
        ack_deadline: int = 60,
        retry_backoff: tuple[float, float] | None = (10.0, MAX_BACKOFF),
        emulator_host: str | None = None,
        create_missing: bool = False,
        poll_interval: float = 0.05,
        max_poll_interval: float = 0.25,
        dlq_scan_limit: int = 10_000,
        rpc_timeout: float = 30.0,
        max_visibility: float = MAX_ACK_DEADLINE,
        credentials: Any = None,
        push_endpoint: str | None = None,
    ) -> None:
        if not project:
            raise ConfigurationError("PubSubQueue needs a project id")
        self.max_deliveries = validate_max_deliveries(max_deliveries)
        # No publish-side dedup (the claim dedupes); a delay is a cw-not-before attribute.
        self.capabilities = QueueCapabilities(dedup=False, max_deliveries=self.max_deliveries)
        if not 1 <= max_visibility <= MAX_ACK_DEADLINE:
            raise ConfigurationError(f"max_visibility must be 1..600 seconds, got {max_visibility}")
        if not 10 <= ack_deadline <= MAX_ACK_DEADLINE:
            raise ConfigurationError(f"ack_deadline must be 10..600 seconds, got {ack_deadline}")
        if retry_backoff is not None:
            low, high = retry_backoff
            if not 0 <= low <= high <= MAX_BACKOFF:
                raise ConfigurationError(
                    "retry_backoff must satisfy 0 <= minimum <= maximum <= 600, "
                    f"got {retry_backoff}"
                )
        self.project = project
        self.topic = _full(project, "topics", topic)
        self.subscription = _full(project, "subscriptions", subscription)
        self.dead_letter_topic = _full(
            project, "topics", dead_letter_topic or f"{topic.rsplit('/', 1)[-1]}-dead-letter"
        )
        self.dead_letter_subscription = _full(
            project,
            "subscriptions",
            dead_letter_subscription or f"{subscription.rsplit('/', 1)[-1]}-dead-letter",
        )
        self.ack_deadline = ack_deadline
        self.retry_backoff = retry_backoff
        self.emulator_host = emulator_host
        self.create_missing = create_missing
        #: With ``create_missing``: make the subscription a push subscription to this URL (the
        #: emulator setup of a functions-framework worker); ``receive`` is then not used.
        self.push_endpoint = push_endpoint
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.dlq_scan_limit = dlq_scan_limit
        self.rpc_timeout = rpc_timeout
        self._credentials = credentials
        self._clients: tuple[Any, Any] | None = None
        self._lock = threading.Lock()
        self._dlq_lock = threading.Lock()
        #: One ModifyAckDeadline reaches at most this far; longer visibilities are kept up by
        #: a background keeper (Pub/Sub's cap is 600 s; lower only to test the keeper).
        self.max_visibility = float(max_visibility)
        self._keeper = self._new_keeper()

    def _new_keeper(self) -> DeadlineKeeper:
        def extend(ack_ids: Sequence[str], seconds: int) -> None:
            self._modack(self.subscription, ack_ids, seconds)

        return DeadlineKeeper(extend, self.max_visibility)

    def _hold(self, ack_ids: Sequence[str], visibility: float) -> None:
        """Set ``ack_ids`` invisible for ``visibility`` s (beyond the cap: via the keeper)."""
        self._modack(self.subscription, ack_ids, _seconds(visibility, 1, self.max_visibility))
        if visibility > self.max_visibility:
            self._keeper.keep(ack_ids, visibility)
        else:
            self._keeper.forget(ack_ids)

    # -- plumbing ---------------------------------------------------------------------------
    def _connect(self) -> tuple[Any, Any]:
        if self._clients is None:
            with self._lock:
                if self._clients is None:
                    clients = pubsub_clients(self.emulator_host, self._credentials)
                    if self.create_missing:
                        from ._pubsub_admin import ensure_resources

                        ensure_resources(self, *clients)
                    self._clients = clients
        return self._clients

    @property
    def publisher(self) -> Any:
        return self._connect()[0]

    @property
    def subscriber(self) -> Any:
        return self._connect()[1]

    def ensure_resources(self) -> None:
        """Create missing topics/subscriptions and align the subscription's policies."""
        from ._pubsub_admin import ensure_resources

        ensure_resources(self, *self._connect())

    def dead_letter_policy(self) -> DeadLetterPolicy:
        """For ``cronwarden doctor``: the subscription's deadLetterPolicy as the broker holds it
        (not as configured here), and whether its dead-letter topic and subscription exist.
        Needs ``pubsub.subscriptions.get`` / ``pubsub.topics.get`` (Pub/Sub Viewer)."""
        from google.api_core import exceptions as gexc

        from cronwarden.ops.doctor import DeadLetterPolicy

        subscription = self.subscriber.get_subscription(
            subscription=self.subscription, timeout=self.rpc_timeout
        )
        policy = subscription.dead_letter_policy
        topic = str(getattr(policy, "dead_letter_topic", "") or "")
        if not topic:
            return DeadLetterPolicy(False, None, f"{self.subscription} has no dead-letter policy")
        try:
            self.publisher.get_topic(topic=topic, timeout=self.rpc_timeout)
            self.subscriber.get_subscription(
                subscription=self.dead_letter_subscription, timeout=self.rpc_timeout
            )
        except gexc.NotFound as exc:
            return DeadLetterPolicy(False, None, f"dead-letter topic or subscription: {exc}")
        limit = int(getattr(policy, "max_delivery_attempts", 0) or 5)  # 0 means Pub/Sub's 5
        return DeadLetterPolicy(True, limit, f"{self.subscription} -> {topic}")

    def _publish(self, topic: str, messages: Sequence[Mapping[str, Any]]) -> None:
        for chunk in _chunks(messages):
            self.publisher.publish(topic=topic, messages=list(chunk), timeout=self.rpc_timeout)

    def _pull(self, subscription: str, max_messages: int) -> list[Any]:
        """One pull that returns at once. Goes through the transport's stub, because the GAPIC
        method warns on every ``return_immediately`` call."""
        from google.api_core import exceptions as gexc
        from google.pubsub_v1 import PullRequest

        request = PullRequest(
            subscription=subscription, max_messages=max_messages, return_immediately=True
        )
        routing = ("x-goog-request-params", urlencode({"subscription": subscription}))
        grpc = grpc_module()
        try:
            response = self.subscriber.transport.pull(
                request, timeout=self.rpc_timeout, metadata=[routing]
            )
        except grpc.RpcError as exc:
            raise cast(Any, gexc.from_grpc_error)(exc) from exc
        return list(response.received_messages)

    def _modack(self, subscription: str, ack_ids: Sequence[str], seconds: int) -> None:
        for chunk in _chunks(ack_ids):
            self._settle_call(
                self.subscriber.modify_ack_deadline,
                subscription=subscription,
                ack_ids=list(chunk),
                ack_deadline_seconds=seconds,
            )

    def _ack(self, subscription: str, ack_ids: Sequence[str]) -> None:
        for chunk in _chunks(ack_ids):
            self._settle_call(
                self.subscriber.acknowledge, subscription=subscription, ack_ids=list(chunk)
            )

    def _settle_call(self, method: Any, **kwargs: Any) -> None:
        from google.api_core import exceptions as gexc

        try:
            method(**kwargs, timeout=self.rpc_timeout)
        except (gexc.InvalidArgument, gexc.FailedPrecondition) as exc:
            # A stale ack id: the visibility ran out and the message is someone else's now.
            log.debug("ignored settle of an expired delivery: %s", exc)

    # -- the work queue ---------------------------------------------------------------------
    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        attrs = dict(attributes or {})
        if dedup_id is not None:
            attrs[DEDUP_ATTRIBUTE] = _clip(dedup_id)
        if delay > 0:
            attrs[NOT_BEFORE_ATTRIBUTE] = f"{time.time() + delay:.3f}"
        if not body and not attrs:
            raise ValueError("Pub/Sub cannot carry an empty message without attributes")
        self._publish(self.topic, [{"data": bytes(body), "attributes": attrs}])

    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + max(0.0, wait)
        interval = self.poll_interval
        while True:
            found = self._receive_now(max(1, min(max_messages, 1000)), visibility)
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                return found
            time.sleep(min(interval, remaining))
            interval = min(interval * 2, self.max_poll_interval)

    def _receive_now(self, max_messages: int, visibility: float) -> list[Delivery]:
        received = self._pull(self.subscription, max_messages)
        if not received:
            return []
        now = time.time()
        due: list[Any] = []
        hidden: dict[int, list[str]] = {}
        for item in received:
            not_before = _number(item.message.attributes.get(NOT_BEFORE_ATTRIBUTE), 0.0)
            if not_before > now:
                hidden.setdefault(_seconds(not_before - now, 1), []).append(item.ack_id)
            else:
                due.append(item)
        for seconds, ack_ids in hidden.items():
            self._modack(self.subscription, ack_ids, seconds)
        if due and (
            visibility > self.max_visibility or _seconds(visibility, 1) != self.ack_deadline
        ):
            self._hold([item.ack_id for item in due], visibility)
        return [self._delivery(item) for item in due]

    @staticmethod
    def _delivery(item: Any) -> Delivery:
        message = item.message
        return Delivery(
            message_id=message.message_id,
            body=bytes(message.data),
            attributes=dict(message.attributes),
            attempt=int(item.delivery_attempt) or 1,
            handle=item.ack_id,
            enqueued_at=message.publish_time,
        )

    def ack(self, delivery: Delivery) -> None:
        self._keeper.forget([delivery.handle])
        self._ack(self.subscription, [delivery.handle])

    def retry(self, delivery: Delivery, delay: float) -> None:
        self._keeper.forget([delivery.handle])
        self._modack(self.subscription, [delivery.handle], _seconds(delay, 0))

    def extend(self, delivery: Delivery, visibility: float) -> None:
        self._hold([delivery.handle], visibility)

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        self.publish_dead_letter(delivery, reason, description)
        self.ack(delivery)

    def publish_dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        """Publish ``delivery`` to the dead-letter topic with the reason attributes, without
        settling it (a push worker settles by its HTTP status instead)."""
        attrs = {
            k: v
            for k, v in delivery.attributes.items()
            if k not in _BOOKKEEPING and not k.startswith(SOURCE_PREFIX)
        }
        attrs.update(
            {
                REASON_ATTRIBUTE: _clip(reason),
                DESCRIPTION_ATTRIBUTE: _clip(description),
                ATTEMPTS_ATTRIBUTE: str(delivery.attempt),
                ORIGINAL_ID_ATTRIBUTE: delivery.message_id,
            }
        )
        self._publish(self.dead_letter_topic, [{"data": delivery.body, "attributes": attrs}])

    # -- the dead-letter queue --------------------------------------------------------------
    def _pull_dead_letters(self, limit: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < limit:
            got = self._pull(self.dead_letter_subscription, min(1000, limit - len(out)))
            if not got:
                break
            out.extend(got)
        return out

    def _release(self, items: Sequence[Any]) -> None:
        self._modack(self.dead_letter_subscription, [item.ack_id for item in items], 0)

    def dlq_depth(self) -> int:
        """Dead letters waiting, counted by pulling and releasing them (at most
        ``dlq_scan_limit``). Production alerting should use the Cloud Monitoring metric
        ``pubsub.googleapis.com/subscription/num_undelivered_messages``."""
        with self._dlq_lock:
            items = self._pull_dead_letters(self.dlq_scan_limit)
            self._release(items)
            return len(items)

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        with self._dlq_lock:
            items = self._pull_dead_letters(limit)
            self._release(items)
        letters = [self._dead_letter(item.message) for item in items]
        return sorted(letters, key=lambda d: d.dead_lettered_at or datetime.min.replace(tzinfo=UTC))

    def _dead_letter(self, message: Any) -> DeadLetter:
        attrs = dict(message.attributes)
        broker_count = attrs.get(f"{SOURCE_PREFIX}DeliveryCount")
        reason = attrs.get(REASON_ATTRIBUTE) or (BROKER_REASON if broker_count else "Unknown")
        description = attrs.get(DESCRIPTION_ATTRIBUTE) or (
            f"not acknowledged after {broker_count} delivery attempts on subscription "
            f"{attrs.get(f'{SOURCE_PREFIX}Subscription', '?')}"
            if broker_count
            else ""
        )
        return DeadLetter(
            message_id=attrs.get(ORIGINAL_ID_ATTRIBUTE) or message.message_id,
            body=bytes(message.data),
            attributes=self._original_attributes(attrs),
            reason=reason,
            description=description,
            attempts=int(attrs.get(ATTEMPTS_ATTRIBUTE) or broker_count or 0),
            dead_lettered_at=message.publish_time,
        )

    @staticmethod
    def _original_attributes(attrs: Mapping[str, str]) -> dict[str, str]:
        return {
            k: v
            for k, v in attrs.items()
            if k not in _BOOKKEEPING and not k.startswith(SOURCE_PREFIX)
        }

    def redrive(self, limit: int = 10) -> int:
        if limit < 1:
            raise ValueError("redrive limit must be at least 1")
        with self._dlq_lock:
            items = self._pull_dead_letters(limit)
            if not items:
                return 0
            messages = []
            for item in items:
                attrs = self._original_attributes(item.message.attributes)
                attrs.pop(NOT_BEFORE_ATTRIBUTE, None)
                attrs[REDRIVE_ATTRIBUTE] = str(int(_number(attrs.get(REDRIVE_ATTRIBUTE), 0)) + 1)
                messages.append({"data": bytes(item.message.data), "attributes": attrs})
            try:
                self._publish(self.topic, messages)
            except BaseException:
                self._release(items)
                raise
            self._ack(self.dead_letter_subscription, [item.ack_id for item in items])
            return len(items)

    def dlq_remove(self, message_ids: Sequence[str]) -> int:
        """Acknowledge (remove) the dead letters with these message ids on the dead-letter
        subscription; every other letter pulled on the way is released at once."""
        wanted = set(message_ids)
        if not wanted:
            return 0
        with self._dlq_lock:
            items = self._pull_dead_letters(self.dlq_scan_limit)
            chosen = [i for i in items if self._dead_letter(i.message).message_id in wanted]
            others = [i for i in items if i not in chosen]
            if others:
                self._release(others)
            if chosen:
                self._ack(self.dead_letter_subscription, [item.ack_id for item in chosen])
            return len(chosen)

    def close(self) -> None:
        self._keeper.close()
        self._keeper = self._new_keeper()
        clients, self._clients = self._clients, None
        for client in clients or ():
            client.transport.close()
