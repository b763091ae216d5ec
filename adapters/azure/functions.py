"""The azure-functions (Python v2 programming model) app: per-job timers, the Service Bus worker
and the liveness watcher.

The rendered ``function_app.py`` of a deployment is exactly::

    from cronwarden.adapters.azure.functions import build_app
    import my_jobs as jobs_module
    app = build_app(jobs_module)

Functions (``$CRONWARDEN_FUNCTIONS``, comma-separated ``trigger,worker,watcher``, chooses which
are registered; default all):

==================  ==========================================================================
``timer_<job>``     one timer per job; schedule ``$CRONWARDEN_SCHEDULE_<JOB_NAME_UPPER>``
                    (NCRONTAB, UTC) or, unset, the job's cron translated to UTC
                    (``cronwarden.deploy.ncrontab``). Each tick enqueues the window that came
                    due since the previous tick, or nothing (see :mod:`._timer`: DST, past due)
``worker``          Service Bus queue trigger on ``$CRONWARDEN_SERVICEBUS_QUEUE`` through the
                    connection ``ServiceBusConnection``, ``auto_complete_messages=False``: it
                    settles each message itself (complete, scheduled retry copy, dead-letter
                    with the reason, lock renewal) through the host's message actions
``watcher``         timer on ``$CRONWARDEN_WATCHER_SCHEDULE`` (default every 5 minutes)
==================  ==========================================================================

Nothing connects at import: the provider (``provider_from_env()`` unless one is given), store,
queue and engine are built on the first invocation and reused. Indexing the app
(``app.get_functions()``) needs no Functions host and no Azure SDK beyond azure-functions.

**Settlement.** The Functions host holds the AMQP link the message came on, so only the host can
settle it: the worker calls the host's message actions (``ServiceBusMessageActions`` of the
``azurefunctions-extensions-bindings-servicebus`` package, looked up by lock token), or whatever
object :attr:`AzureRuntime.actions` is set to (the local host in
:mod:`cronwarden.emulators.azure_functions.host` plays that part), in one function,
:func:`settle_with_actions`, applying the worker's verdict. Retries are scheduled copies sent
with the app's own Service Bus sender, then the original is completed (see :mod:`.servicebus`
for the window between the two).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from cronwarden.hosting import HostedRuntime, enabled_functions, jobset_of
from cronwarden.jobs.definitions import Job, JobSet
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.logs import get_logger, trace_scope
from cronwarden.model.ports import DeadLetter, Delivery, Provider
from cronwarden.model.redaction import redact
from cronwarden.model.runs import RunRequest
from cronwarden.model.settlement import Action, Verdict, republish

from ._timer import TimerSchedule, due_window, timer_schedule_for
from .servicebus import ServiceBusQueue, attempt_of, public_attributes, retry_by_copy
from .settings import (
    SERVICEBUS_BINDING_CONNECTION,
    AzureSettings,
    schedule_setting,
)

# The engine and the watcher load with the first invocation that needs them, not when the host
# indexes the app (a cold start): a timer or a worker never builds the watcher.
if TYPE_CHECKING:
    from cronwarden.run.engine import EngineSettings, Outcome
    from cronwarden.watch.notify import Notifier
    from cronwarden.watch.watcher import Report

log = get_logger("azure.functions")

CONNECTION = SERVICEBUS_BINDING_CONNECTION
SETTLEMENT_EXTENSION = "azurefunctions.extensions.bindings.servicebus"
_TICK_ATTEMPTS = 3
Clock = Callable[[], datetime]


class MessageActions(Protocol):
    """What the Functions host offers to settle a message it delivered (by its lock token)."""

    def complete(self, message: Any) -> None: ...

    def abandon(self, message: Any) -> None: ...

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None: ...

    def renew_message_lock(self, message: Any) -> None: ...


def _diagnostic_id(message: Any) -> str | None:
    """The W3C ``traceparent`` the Service Bus SDK stamps on a message (``Diagnostic-Id``)."""
    props = getattr(message, "application_properties", None) or {}
    value = props.get("Diagnostic-Id") or props.get(b"Diagnostic-Id")
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def timer_function_name(job_name: str) -> str:
    return "timer_" + job_name.replace("-", "_")


def delivery_of(message: Any) -> Delivery:
    """A :class:`Delivery` of a message the Functions host delivered.

    Two shapes: the classic binding's ``func.ServiceBusMessage``, whose ``delivery_count`` is 1
    on the first delivery (the host's .NET SDK adds one to the AMQP header's count of failed
    deliveries), and the SDK-type binding's ``azure.servicebus.ServiceBusReceivedMessage``
    (decoded from the raw AMQP message: 0 on the first delivery). Earlier scheduled copies add
    ``cw-attempt-base``.
    """
    if not hasattr(message, "get_body"):  # SDK type: same decoding as a pull receiver
        return ServiceBusQueue.delivery_of_message(message)
    raw = message.application_properties or {}
    props = {str(k): str(v) for k, v in raw.items()}
    count = int(message.delivery_count or 1)
    delivery = Delivery(
        message_id=str(message.message_id or ""),
        body=bytes(message.get_body()),
        attributes=public_attributes(props),
        attempt=attempt_of(props, count - 1),
        handle=message,
        enqueued_at=message.enqueued_time_utc,
    )
    delivery.__dict__["_hidden"] = {k: v for k, v in props.items() if k not in delivery.attributes}
    return delivery


def settle_with_actions(
    verdict: Verdict, delivery: Delivery, servicebus: ServiceBusQueue, actions: MessageActions
) -> None:
    """Apply ``verdict`` to a host-delivered message through the host's message actions;
    sends (postponed and retry copies) go through the app's own ``servicebus`` sender.

    POSTPONE: a fresh copy, then complete (a RETRY if the copy can not be sent). RETRY: a
    scheduled copy carrying the attempts, then complete; attempts used up: dead-letter with
    ``MaxDeliveryCountExceeded`` (:func:`~.servicebus.retry_by_copy`)."""
    if verdict.action is Action.POSTPONE:
        if republish(servicebus, delivery, verdict.delay):
            verdict = Verdict.ack("postpone")
        else:
            verdict = Verdict.retry(verdict.delay, verdict.reason, verdict.detail)
    if verdict.action is Action.RETRY:
        verdict = retry_by_copy(servicebus, delivery, verdict.delay)
    if verdict.action is Action.ACK:
        actions.complete(delivery.handle)
    else:
        actions.deadletter(
            delivery.handle,
            deadletter_reason=verdict.reason[:4096],
            deadletter_error_description=verdict.detail[:4096],
        )


class HostSettledQueue:
    """Deprecated shim (not a :class:`~cronwarden.model.ports.Queue`): the old per-call settlement
    over :func:`settle_with_actions`. Hosts call :func:`settle_with_actions` directly."""

    def __init__(self, servicebus: ServiceBusQueue, actions: MessageActions) -> None:
        self.servicebus = servicebus
        self.actions = actions
        self.max_deliveries = servicebus.max_deliveries

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        self.servicebus.publish(body, attributes=attributes, dedup_id=dedup_id, delay=delay)

    def ack(self, delivery: Delivery) -> None:
        settle_with_actions(Verdict.ack(), delivery, self.servicebus, self.actions)

    def retry(self, delivery: Delivery, delay: float) -> None:
        settle_with_actions(Verdict.retry(delay), delivery, self.servicebus, self.actions)

    def extend(self, delivery: Delivery, visibility: float) -> None:
        self.actions.renew_message_lock(delivery.handle)

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        verdict = Verdict.dead_letter(reason, description)
        settle_with_actions(verdict, delivery, self.servicebus, self.actions)

    def dlq_depth(self) -> int:
        return self.servicebus.dlq_depth()

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        return self.servicebus.dlq_peek(limit)

    def redrive(self, limit: int = 10) -> int:
        return self.servicebus.redrive(limit)


def _host_actions() -> MessageActions:
    try:
        extension = importlib.import_module(SETTLEMENT_EXTENSION)
    except ImportError as exc:
        raise ConfigurationError(
            "the worker settles messages itself (autoCompleteMessages false) through the "
            "Functions host: add azurefunctions-extensions-bindings-servicebus to "
            "requirements.txt"
        ) from exc
    actions: MessageActions = extension.ServiceBusMessageActions.get_instance()
    return actions


class AzureRuntime(HostedRuntime):
    """What the functions share; built lazily, once per instance, thread-safe."""

    def __init__(
        self,
        jobs: JobSet,
        *,
        provider: Provider | None = None,
        settings: EngineSettings | None = None,
        notifiers: list[Notifier] | None = None,
        clock: Clock | None = None,
        actions: MessageActions | None = None,
    ) -> None:
        super().__init__(jobs, provider=provider, settings=settings, notifiers=notifiers)
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self.actions = actions
        self.timers: dict[str, TimerSchedule] = {}
        self.last_report: Report | None = None

    def servicebus(self) -> ServiceBusQueue:
        return self.queue_of(ServiceBusQueue, "the Azure timer and worker functions", "azure")

    def run_queue(self) -> ServiceBusQueue:
        return self.servicebus()

    # -- the handlers -----------------------------------------------------------------------
    def handle_timer(self, job: Job, past_due: bool = False) -> list[RunRequest]:
        """One tick of ``job``'s timer: enqueue the window that came due, or nothing."""
        now = self.clock()
        window = due_window(job, self.timers[job.name], now, past_due=past_due)
        if window is None:
            log.info(
                "%s: timer tick at %s is not the first after a window of %s; nothing to enqueue",
                job.name,
                now.isoformat(),
                job.schedule.describe(),
                extra={"event": "trigger.skipped", "job": job.name, "reason": "not_due"},
            )
            return []
        if past_due:
            log.warning(
                "%s: past-due timer tick; enqueuing the latest due window",
                job.name,
                extra={"event": "trigger.past_due", "job": job.name},
            )
        for attempt in range(_TICK_ATTEMPTS):
            try:
                return self.trigger.tick(job.name, window, reason="schedule")
            except Exception as exc:  # publishes are idempotent (MessageId): try again
                if attempt + 1 == _TICK_ATTEMPTS:
                    raise
                log.warning(
                    "%s: enqueuing failed (%s); retrying",
                    job.name,
                    redact(f"{type(exc).__name__}: {exc}"),
                    extra={"event": "trigger.error", "job": job.name},
                )
                time.sleep(2.0**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def handle_message(self, message: Any, actions: Any = None) -> Outcome | None:
        """One host-delivered Service Bus message → one execution, settled via the actions
        (given by the host with the SDK-type binding, else :attr:`actions` or the host's)."""
        actions = actions or self.actions or _host_actions()
        servicebus = self.servicebus()
        delivery = delivery_of(message)
        with trace_scope(_diagnostic_id(message)):  # log lines carry the message's trace id
            decision = self.worker.decide(
                delivery, extend=lambda: actions.renew_message_lock(delivery.handle)
            )
            settle_with_actions(decision.verdict, delivery, servicebus, actions)
        return decision.outcome

    def handle_watcher(self) -> Report:
        report = self.watcher.check()
        self.last_report = report
        return report


def build_app(
    module_or_jobset: ModuleType | JobSet | str,
    *,
    provider: Provider | None = None,
    settings: EngineSettings | None = None,
    notifiers: list[Notifier] | None = None,
    clock: Clock | None = None,
    actions: MessageActions | None = None,
    env: Mapping[str, str] | None = None,
    sdk_binding: bool | None = None,
) -> Any:
    """A ``func.FunctionApp`` serving the jobs of ``module_or_jobset`` (see the module docs).

    Schedules are resolved now (a bad one fails indexing with a clear message, not the first
    tick). ``env`` defaults to ``os.environ``; ``clock``/``actions`` are for hosts and tests.
    ``sdk_binding`` (default: whether the settlement extension is installed) picks the
    worker's binding shape (see :func:`_worker_function`).
    The :class:`AzureRuntime` is ``app.cronwarden_runtime``.
    """
    import azure.functions as func

    env = os.environ if env is None else env
    app_settings = AzureSettings.from_env(env)
    jobs = jobset_of(module_or_jobset)
    runtime = AzureRuntime(
        jobs,
        provider=provider,
        settings=settings,
        notifiers=notifiers,
        clock=clock,
        actions=actions,
    )
    enabled = enabled_functions(env)
    app = func.FunctionApp()
    app.__dict__["cronwarden_runtime"] = runtime

    if "trigger" in enabled:
        for job in (j for j in jobs if j.timed):  # dependent jobs: fired by completions
            timer = timer_schedule_for(job, app_settings.schedule_for(job.name))
            runtime.timers[job.name] = timer
            _register_timer(app, func, runtime, job, timer)

    if "worker" in enabled:
        worker = _worker_function(func, runtime, sdk_binding)
        app.function_name("worker")(
            app.service_bus_queue_trigger(
                arg_name="message",
                connection=CONNECTION,
                queue_name=app_settings.queue,
                auto_complete_messages=False,
            )(worker)
        )

    if "watcher" in enabled:
        schedule = app_settings.watcher_schedule
        TimerSchedule.parse(schedule)

        def watcher(timer: func.TimerRequest) -> None:
            try:
                runtime.handle_watcher()
            except Exception as exc:
                log.error(
                    "watcher check failed: %s",
                    redact(f"{type(exc).__name__}: {exc}"),
                    extra={"event": "watcher.error"},
                )
                raise

        watcher.__annotations__ = {"timer": func.TimerRequest, "return": None}
        app.function_name("watcher")(
            app.timer_trigger(arg_name="timer", schedule=schedule, use_monitor=True)(watcher)
        )
    return app


def settlement_extension_installed() -> bool:
    """Whether ``azurefunctions-extensions-bindings-servicebus`` can be imported (not importing
    it: it loads grpc)."""
    try:
        return importlib.util.find_spec(SETTLEMENT_EXTENSION) is not None
    except (ImportError, ValueError):  # a parent package is missing
        return False


def _worker_function(func: Any, runtime: AzureRuntime, sdk_binding: bool | None) -> Any:
    """The worker: with the settlement extension, the documented SDK-type binding (the message
    as ``azure.servicebus.ServiceBusReceivedMessage`` plus the host's ``message_actions``);
    without it, the classic ``func.ServiceBusMessage`` binding, settled through
    :attr:`AzureRuntime.actions` (a host stand-in) or the extension's actions singleton."""
    if sdk_binding is None:
        sdk_binding = settlement_extension_installed()
    if sdk_binding:
        extension = importlib.import_module(SETTLEMENT_EXTENSION)

        def sdk_worker(message: Any, message_actions: Any) -> None:
            runtime.handle_message(message, message_actions)

        # Real classes, not the strings postponed evaluation leaves (the worker inspects them).
        sdk_worker.__annotations__ = {
            "message": extension.ServiceBusReceivedMessage,
            "message_actions": extension.ServiceBusMessageActions,
            "return": None,
        }
        sdk_worker.__name__ = "worker"
        return sdk_worker

    def worker(message: Any) -> None:
        runtime.handle_message(message)

    worker.__annotations__ = {"message": func.ServiceBusMessage, "return": None}
    return worker


def _register_timer(app: Any, func: Any, runtime: AzureRuntime, job: Job, timer: Any) -> None:
    def tick(timer: func.TimerRequest) -> None:
        runtime.handle_timer(job, past_due=bool(timer.past_due))

    name = timer_function_name(job.name)
    tick.__name__ = name
    tick.__annotations__ = {"timer": func.TimerRequest, "return": None}
    app.function_name(name)(
        app.timer_trigger(arg_name="timer", schedule=timer.ncrontab, use_monitor=True)(tick)
    )


def runtime_of(app: Any) -> AzureRuntime:
    """The :class:`AzureRuntime` of an app made by :func:`build_app`."""
    runtime = getattr(app, "cronwarden_runtime", None)
    if not isinstance(runtime, AzureRuntime):
        raise TypeError(f"{app!r} was not made by build_app")
    return runtime


__all__ = [
    "AzureRuntime",
    "HostSettledQueue",
    "MessageActions",
    "build_app",
    "delivery_of",
    "runtime_of",
    "schedule_setting",
    "settle_with_actions",
    "settlement_extension_installed",
    "timer_function_name",
]
