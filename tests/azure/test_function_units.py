"""Pure unit tests of the Azure timer logic and the worker's settlement mapping (no emulator)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cronwarden
from cronwarden.adapters.azure._timer import TimerSchedule, due_window, timer_schedule_for
from cronwarden.adapters.azure.functions import HostSettledQueue, delivery_of
from cronwarden.adapters.azure.servicebus import ATTEMPT_BASE, attempt_of
from cronwarden.model.errors import InvalidJobDefinition


def _job(cron: str, tz: str) -> cronwarden.Job:
    return cronwarden.job("j", cron=cron, timezone=tz, max_runtime="1m")(lambda ctx: None)


def test_timer_schedule_occurrences_with_a_fixed_second() -> None:
    timer = TimerSchedule.parse("30 0 0,1 * * *")
    at = datetime(2026, 3, 1, 0, 40, tzinfo=UTC)
    assert timer.latest(at) == datetime(2026, 3, 1, 0, 0, 30, tzinfo=UTC)
    assert timer.previous(timer.latest(at)) == datetime(2026, 2, 28, 1, 0, 30, tzinfo=UTC)
    assert timer.next_after(at) == datetime(2026, 3, 1, 1, 0, 30, tzinfo=UTC)
    with pytest.raises(InvalidJobDefinition, match="seconds field"):
        TimerSchedule.parse("*/10 * * * * *")


def test_a_timer_defaults_to_the_jobs_cron_in_utc() -> None:
    assert timer_schedule_for(_job("0 2 * * *", "Europe/Berlin"), None).ncrontab == "0 0 0,1 * * *"
    assert timer_schedule_for(_job("*/15 * * * *", "UTC"), "").ncrontab == "0 */15 * * * *"
    assert timer_schedule_for(_job("0 2 * * *", "UTC"), "0 0 * * * *").ncrontab == "0 0 * * * *"
    with pytest.raises(InvalidJobDefinition, match="split it into two jobs"):
        timer_schedule_for(_job("0 3 1 * MON", "UTC"), None)


# Not Australia/Lord_Howe: its 30-minute fall-back makes the core's forward window iteration
# (cronsim) skip a window that ``Schedule.floor`` reports (reported to the core's owner).
ZONES = ["Europe/Berlin", "America/New_York", "Pacific/Auckland", "Asia/Kolkata", "UTC"]
DST_EDGES = [
    datetime(2026, 3, 20),
    datetime(2026, 10, 20),
    datetime(2026, 3, 1),
    datetime(2026, 4, 1),
]
CRONS = ["0 2 * * *", "30 2 * * *", "0 */6 * * *", "15 1 * * MON-FRI", "45 23 * * *"]


@settings(max_examples=25, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    cron=st.sampled_from(CRONS),
    start=st.sampled_from(DST_EDGES) | st.datetimes(datetime(2026, 1, 1), datetime(2027, 10, 1)),
    late=st.integers(min_value=0, max_value=4),
)
def test_every_window_is_enqueued_by_exactly_one_tick(
    zone: str, cron: str, start: datetime, late: int
) -> None:
    """Over 3 weeks of the UTC timer's ticks, each window of the job (in its own zone, across
    DST changes) is enqueued exactly once, by the first tick at or after it."""
    job = _job(cron, zone)
    timer = timer_schedule_for(job, None)
    begin = start.replace(tzinfo=UTC)
    end = begin + timedelta(days=21)
    tick = timer.next_after(begin)
    enqueued: list[datetime] = []
    while tick < end:
        window = due_window(job, timer, tick + timedelta(seconds=late))
        if window is not None:
            enqueued.append(window)
        tick = timer.next_after(tick)
    first, last = timer.next_after(begin), timer.previous(tick)
    # Each window after the tick before the first one, up to the last tick, exactly once.
    expected = [w for w in job.schedule.windows(timer.previous(first), last)]
    expected = [w for w in expected if w > timer.previous(first)]
    assert enqueued == expected
    assert len(enqueued) == len(set(enqueued))


def test_delivery_attempts_count_from_one_across_copies() -> None:
    from azure.functions.servicebus import ServiceBusMessage

    def message(count: int, base: int | None) -> Any:
        props = {"job": "j"} | ({ATTEMPT_BASE: str(base)} if base is not None else {})
        return ServiceBusMessage(
            body=b"{}",
            application_properties=props,
            user_properties=props,
            message_id="j:2026-01-20T02:00Z",
            delivery_count=count,
            lock_token="00000000-0000-0000-0000-000000000001",
        )

    assert delivery_of(message(1, None)).attempt == 1  # the host counts from 1
    assert delivery_of(message(2, None)).attempt == 2  # a lock expired once
    assert delivery_of(message(1, 2)).attempt == 3  # a scheduled copy after 2 attempts
    assert delivery_of(message(1, 2)).attributes == {"job": "j"}  # bookkeeping hidden
    assert attempt_of({}, 0) == 1  # the Python SDK's AMQP count starts at 0


class FakeActions:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def complete(self, message: Any) -> None:
        self.calls.append(("complete", message))

    def abandon(self, message: Any) -> None:
        self.calls.append(("abandon", message))

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        self.calls.append(("deadletter", (deadletter_reason, deadletter_error_description)))

    def renew_message_lock(self, message: Any) -> None:
        self.calls.append(("renew", message))


class FakeServiceBus:
    max_deliveries = 3

    def __init__(self) -> None:
        self.copies: list[float] = []

    def retry_copy(self, delivery: Any, delay: float) -> bool:
        if delivery.attempt >= self.max_deliveries:
            return False
        self.copies.append(delay)
        return True


def test_host_settled_queue_maps_settlement_to_the_hosts_actions() -> None:
    from cronwarden.model.ports import Delivery

    actions, bus = FakeActions(), FakeServiceBus()
    queue = HostSettledQueue(bus, actions)  # type: ignore[arg-type]
    first = Delivery("m", b"", {}, attempt=1, handle="msg-1")
    queue.retry(first, 5.0)  # a scheduled copy, then the original completes
    assert bus.copies == [5.0] and actions.calls == [("complete", "msg-1")]
    last = Delivery("m", b"", {}, attempt=3, handle="msg-3")
    queue.retry(last, 5.0)  # attempts used up: an explicit dead letter with the reason
    assert actions.calls[-1] == ("deadletter", ("MaxDeliveryCountExceeded", "3 attempts (limit 3)"))
    queue.extend(first, 60)
    queue.dead_letter(first, "MalformedRequest", "not JSON")
    assert actions.calls[-2:] == [
        ("renew", "msg-1"),
        ("deadletter", ("MalformedRequest", "not JSON")),
    ]


def test_a_tick_retries_a_failed_enqueue_then_fails_the_invocation() -> None:
    from cronwarden.adapters.azure.functions import AzureRuntime

    job = _job("0 * * * *", "UTC")
    runtime = AzureRuntime(
        cronwarden.JobSet([job]), clock=lambda: datetime(2026, 1, 20, 2, 0, 1, tzinfo=UTC)
    )
    runtime.timers[job.name] = timer_schedule_for(job, None)
    calls: list[datetime] = []

    class Flaky:
        def tick(self, name: str, when: datetime, *, reason: str) -> list[Any]:
            calls.append(when)
            if len(calls) == 1:
                raise ConnectionError("broker hiccup")
            return ["ok"]

    runtime._trigger = Flaky()  # type: ignore[assignment]
    assert runtime.handle_timer(job) == ["ok"]
    assert calls == [datetime(2026, 1, 20, 2, 0, tzinfo=UTC)] * 2

    class Down:
        def tick(self, name: str, when: datetime, *, reason: str) -> list[Any]:
            raise ConnectionError("down")

    runtime._trigger = Down()  # type: ignore[assignment]
    runtime.clock = lambda: datetime(2026, 1, 20, 3, 0, 1, tzinfo=UTC)
    with pytest.raises(ConnectionError):
        runtime.handle_timer(job)


def test_queue_repr_and_errors_never_show_the_connection_secret() -> None:
    from cronwarden.adapters.azure import ServiceBusQueue
    from cronwarden.adapters.azure._redact import redact

    secret = "c2VjcmV0LWtleS1kby1ub3QtbG9n"
    conn = (
        f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey={secret}"
    )
    queue = ServiceBusQueue.from_connection_string(conn, "runs")
    assert secret not in repr(queue)
    assert secret not in redact(f"failed to connect with {conn}")
    queue.close()
