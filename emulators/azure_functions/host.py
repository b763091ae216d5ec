"""A local stand-in for the Azure Functions host, for apps made by ``build_app``.

The Functions host (Core Tools) can't run everywhere (not on these machines); this plays its
two trigger types against the real SDKs and emulators, reading only what the host reads, the
app's indexed functions (``app.get_functions()``: bindings, schedules, queue names):

* **timers**: each timer function fires on its NCRONTAB schedule (UTC) through
  ``cronwarden.hosting.runtime.Scheduler`` and is called with a real
  ``azure.functions.timer.TimerRequest``
  (``past_due`` when the tick is called later than ``past_due_after``);
* **Service Bus trigger**: messages are received in peek-lock through ``azure-servicebus`` on the
  binding's queue and connection (app setting ``<connection>`` = connection string, or
  ``<connection>__fullyQualifiedNamespace`` with a token credential), converted to
  ``azure.functions.ServiceBusMessage`` as the host does (``delivery_count`` from 1), and given
  to the function — or, for a function with a ``message_actions`` parameter (the SDK-type
  binding of ``azurefunctions-extensions-bindings-servicebus``), given as the SDK's
  ``ServiceBusReceivedMessage`` together with the actions. The host renews each lock while
  the function runs (the host's ``maxAutoLockRenewalDuration``) and settles through
  :class:`ReceiverActions`, the host's message actions, by lock token.
  ``autoCompleteMessages: true`` bindings are completed when the function returns and
  abandoned when it raises, like the host does.

Run it as a process (what the end-to-end tests kill and restart)::

    python -m cronwarden.emulators.azure_functions.host --jobs my_jobs [--no-timers]

(plus ``--lease-margin S``; ``python -m cronwarden.adapters.azure.host`` is the old name, kept.)
"""

from __future__ import annotations

import argparse
import inspect
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwarden.adapters.azure._timer import TimerSchedule
from cronwarden.adapters.azure.servicebus import ServiceBusQueue
from cronwarden.hosting.runtime import Scheduler
from cronwarden.jobs.definitions import Job, JobSet
from cronwarden.model.logs import get_logger
from cronwarden.model.ports import Delivery
from cronwarden.model.redaction import redact
from cronwarden.model.schedule import utc

log = get_logger("azure.host")
Clock = Callable[[], datetime]


class ReceiverActions:
    """The host's message actions: settle a delivered message by its lock token on the receiver
    that received it."""

    def __init__(self, queue: ServiceBusQueue) -> None:
        self.queue = queue
        self._pending: dict[str, Delivery] = {}
        self._lock = threading.Lock()
        self.settled: dict[str, str] = {}  #: lock token → how it was settled (for tests)

    def hold(self, token: str, delivery: Delivery) -> None:
        with self._lock:
            self._pending[token] = delivery

    def _take(self, message: Any, how: str) -> Delivery:
        token = str(message.lock_token)
        with self._lock:
            delivery = self._pending.pop(token, None)
            if delivery is None:
                raise RuntimeError(f"message {message.message_id} is not locked by this host")
            self.settled[token] = how
            return delivery

    def complete(self, message: Any) -> None:
        self.queue.ack(self._take(message, "complete"))

    def abandon(self, message: Any) -> None:
        self.queue.abandon(self._take(message, "abandon"))

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        delivery = self._take(message, "deadletter")
        self.queue.dead_letter(
            delivery, deadletter_reason or "", deadletter_error_description or ""
        )

    def renew_message_lock(self, message: Any) -> None:
        with self._lock:
            delivery = self._pending.get(str(message.lock_token))
        if delivery is None:
            raise RuntimeError(f"message {message.message_id} is not locked by this host")
        self.queue.extend(delivery, 0.0)

    def unsettled(self, token: str) -> Delivery | None:
        with self._lock:
            return self._pending.pop(token, None)


def functions_message(message: Any) -> Any:
    """An ``azure.functions.servicebus.ServiceBusMessage`` for an SDK-received message, as the
    host builds it (``delivery_count`` counts from 1, application properties as text)."""
    from azure.functions.servicebus import ServiceBusMessage

    props = {
        (k.decode() if isinstance(k, bytes) else str(k)): (
            v.decode() if isinstance(v, bytes) else v
        )
        for k, v in (message.application_properties or {}).items()
    }
    body = message.body
    raw = bytes(body) if isinstance(body, bytes | bytearray) else b"".join(bytes(p) for p in body)
    return ServiceBusMessage(
        body=raw,
        application_properties=props,
        user_properties=dict(props),
        message_id=str(message.message_id or ""),
        delivery_count=int(message.delivery_count or 0) + 1,
        lock_token=str(message.lock_token),
        enqueued_time_utc=message.enqueued_time_utc,
        locked_until=message.locked_until_utc,
        sequence_number=message.sequence_number,
        content_type=message.content_type,
        correlation_id=message.correlation_id,
    )


class LocalHost:
    """Hosts the functions of ``app`` (see the module docstring). ``env`` holds app settings."""

    def __init__(
        self,
        app: Any,
        *,
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        lock_renewal: float = 300.0,
        past_due_after: float = 60.0,
    ) -> None:
        self.app = app
        self.env = os.environ if env is None else env
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self.lock_renewal = lock_renewal
        self.past_due_after = timedelta(seconds=past_due_after)
        self.timers: dict[str, tuple[Callable[..., Any], TimerSchedule]] = {}
        self.queue_triggers: list[tuple[Callable[..., Any], dict[str, Any]]] = []
        self.last_tick: dict[str, datetime] = {}
        self._queues: dict[tuple[str, str], ServiceBusQueue] = {}
        self.actions: dict[tuple[str, str], ReceiverActions] = {}
        for function in app.get_functions():  # once per app object
            user = function.get_user_function()
            for binding in function.get_bindings():
                spec = binding.get_dict_repr()
                if spec["type"] == "timerTrigger":
                    self.timers[function.get_function_name()] = (
                        user,
                        TimerSchedule.parse(spec["schedule"]),
                    )
                elif spec["type"] == "serviceBusTrigger":
                    self.queue_triggers.append((user, spec))
        runtime = getattr(app, "cronwarden_runtime", None)
        if runtime is not None and self.queue_triggers:
            runtime.actions = self.actions_for(self.queue_triggers[0][1])

    # -- Service Bus ------------------------------------------------------------------------
    def _queue(self, spec: Mapping[str, Any]) -> ServiceBusQueue:
        key = (str(spec["connection"]), str(spec["queueName"]))
        if key not in self._queues:
            setting, name = key
            conn = self.env.get(setting)
            if conn:
                queue = ServiceBusQueue.from_connection_string(conn, name, max_deliveries=10**6)
            else:
                namespace = self.env.get(f"{setting}__fullyQualifiedNamespace")
                if not namespace:
                    raise RuntimeError(
                        f"app setting {setting} (connection string) or "
                        f"{setting}__fullyQualifiedNamespace is not set"
                    )
                from cronwarden.adapters.azure._credentials import credential_from_env

                queue = ServiceBusQueue.from_namespace(
                    namespace, credential_from_env(), name, max_deliveries=10**6
                )
            self._queues[key] = queue
        return self._queues[key]

    def check_connections(self) -> None:
        """Raise RuntimeError naming the first Service Bus app setting that is missing."""
        for _, spec in self.queue_triggers:
            setting = str(spec["connection"])
            if not (self.env.get(setting) or self.env.get(f"{setting}__fullyQualifiedNamespace")):
                raise RuntimeError(
                    f"app setting {setting} (a Service Bus connection string) or "
                    f"{setting}__fullyQualifiedNamespace is not set; e.g. export {setting}="
                    '"$CRONWARDEN_SERVICEBUS_CONNECTION" from `cronwarden emulators servicebus`'
                )

    def actions_for(self, spec: Mapping[str, Any]) -> ReceiverActions:
        key = (str(spec["connection"]), str(spec["queueName"]))
        if key not in self.actions:
            self.actions[key] = ReceiverActions(self._queue(spec))
        return self.actions[key]

    def deliver(self, *, wait: float = 1.0, max_messages: int = 1) -> int:
        """Receive up to ``max_messages`` per queue trigger and invoke its function on each."""
        handled = 0
        for function, spec in self.queue_triggers:
            queue = self._queue(spec)
            actions = self.actions_for(spec)
            for delivery in queue.receive(max_messages, visibility=self.lock_renewal, wait=wait):
                handled += 1
                token = str(delivery.handle.lock_token)
                actions.hold(token, delivery)
                try:
                    if "message_actions" in inspect.signature(function).parameters:
                        function(delivery.handle, actions)  # the SDK-type binding
                    else:
                        function(functions_message(delivery.handle))
                except Exception as exc:
                    log.error(
                        "function raised: %s",
                        redact(f"{type(exc).__name__}: {exc}"),
                        extra={"event": "host.function_failed"},
                    )
                    left = actions.unsettled(token)
                    if left is not None:
                        queue.abandon(left)
                    continue
                left = actions.unsettled(token)
                if left is not None and spec.get("autoCompleteMessages", True):
                    queue.ack(left)
                elif left is not None:  # the function neither settled nor failed: lock expires
                    log.warning(
                        "function returned without settling message %s",
                        delivery.message_id,
                        extra={"event": "host.unsettled"},
                    )
        return handled

    # -- timers -----------------------------------------------------------------------------
    def fire(self, name: str, *, past_due: bool = False) -> None:
        """Invoke timer function ``name`` now with a real ``TimerRequest``."""
        from azure.functions.timer import TimerRequest

        function, schedule = self.timers[name]
        now = utc(self.clock())
        last = self.last_tick.get(name)
        status = {
            "Last": last.isoformat() if last else None,
            "Next": schedule.latest(now).isoformat(),
            "LastUpdated": now.isoformat(),
        }
        self.last_tick[name] = now
        function(TimerRequest(past_due=past_due, schedule_status=status))

    def scheduler(self, stop: threading.Event, *, max_sleep: float = 1.0) -> Scheduler:
        """A :class:`~cronwarden.hosting.runtime.Scheduler` firing every timer on its UTC
        schedule."""
        pseudo = JobSet(
            Job(name, schedule.schedule, lambda ctx: None, timedelta(seconds=1))
            for name, (_, schedule) in self.timers.items()
        )

        def tick(name: str, fire_time: datetime) -> None:
            late = utc(self.clock()) - fire_time > self.past_due_after
            self.fire(name, past_due=late)

        return Scheduler(pseudo, tick, stop, clock=self.clock, max_sleep=max_sleep)

    def serve(self, stop: threading.Event, *, timers: bool = True, wait: float = 1.0) -> None:
        """Run timers (a scheduler thread) and deliver messages until ``stop`` is set."""
        thread = self.scheduler(stop) if timers and self.timers else None
        if thread is not None:
            thread.start()
        try:
            while not stop.is_set():
                try:
                    self.deliver(wait=wait)
                except Exception as exc:
                    log.error(
                        "receive failed: %s",
                        redact(str(exc)),
                        extra={"event": "host.error"},
                    )
                    stop.wait(1.0)
        finally:
            if thread is not None:
                thread.join(timeout=5)

    def close(self) -> None:
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
        runtime = getattr(self.app, "cronwarden_runtime", None)
        if runtime is not None:
            runtime.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", required=True, help="job module (dotted name or file)")
    parser.add_argument("--no-timers", action="store_true", help="only the Service Bus trigger")
    parser.add_argument("--lease-margin", type=float, help="engine lease margin in seconds")
    args = parser.parse_args(argv)
    from cronwarden.adapters.azure.functions import build_app
    from cronwarden.jobs.config import load_module
    from cronwarden.model.logs import configure
    from cronwarden.run.engine import EngineSettings

    configure(stream=sys.stderr, root=True)  # the functions SDK's warnings too: JSON only
    settings = None
    if args.lease_margin is not None:
        settings = EngineSettings(lease_margin=timedelta(seconds=args.lease_margin))
    from cronwarden.model.errors import CronwardenError

    try:
        app = build_app(load_module(args.jobs), settings=settings)
    except CronwardenError as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        sys.exit(2)
    try:
        host = LocalHost(app)
        host.check_connections()
    except RuntimeError as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        sys.exit(2)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        host.serve(stop, timers=not args.no_timers)
    finally:
        host.close()


if __name__ == "__main__":
    main()
