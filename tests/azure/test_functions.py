"""The azure-functions app end to end on Azurite + the Service Bus emulator, through the real SDKs:
timer tick (real ``TimerRequest``) → Service Bus → worker function (real ``ServiceBusMessage``
built from an SDK-received message, settled by lock token as the host does) → handler → Table
records."""

from __future__ import annotations

import inspect
import itertools
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronwarden import JobSet
from cronwarden.adapters.azure.functions import build_app, schedule_setting
from cronwarden.emulators.azurite import Azurite
from cronwarden.hosting.trigger import request_attributes
from cronwarden.model import RunRequest, format_window
from cronwarden.model.errors import ConfigurationError, InvalidJobDefinition
from cronwarden.model.ports import RUN, STATUS, Key

from . import e2e_jobs
from .apphost import deployed

pytestmark = pytest.mark.azure
W = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


def jobs(*names: str) -> JobSet:
    return JobSet(j for j in JobSet.from_module(e2e_jobs) if j.name in names)


def bindings(app: Any) -> dict[str, list[dict[str, Any]]]:
    return {
        f.get_function_name(): [b.get_dict_repr() for b in f.get_bindings()]
        for f in app.get_functions()
    }


# -- indexing -------------------------------------------------------------------------------
def test_app_indexes_without_the_host_and_honours_the_settings() -> None:
    env = {
        schedule_setting("hourly"): "0 0 * * * *",
        "CRONWARDEN_SERVICEBUS_QUEUE": "runs",
        "CRONWARDEN_WATCHER_SCHEDULE": "0 */10 * * * *",
    }
    found = bindings(build_app(jobs("hourly", "berlin"), env=env))
    assert sorted(found) == ["timer_berlin", "timer_hourly", "watcher", "worker"]
    assert found["timer_hourly"][0]["schedule"] == "0 0 * * * *"  # the app setting
    assert found["timer_berlin"][0]["schedule"] == "0 0 0,1 * * *"  # translated to UTC
    (sb,) = found["worker"]
    assert sb["type"] == "serviceBusTrigger" and sb["queueName"] == "runs"
    assert sb["connection"] == "ServiceBusConnection" and sb["autoCompleteMessages"] is False
    assert found["watcher"][0]["schedule"] == "0 */10 * * * *"
    only = bindings(build_app(jobs("hourly"), env={"CRONWARDEN_FUNCTIONS": "watcher"}))
    assert list(only) == ["watcher"]


def test_bad_schedules_fail_at_indexing_with_a_clear_message() -> None:
    with pytest.raises(InvalidJobDefinition, match="6 NCRONTAB fields"):
        build_app(jobs("hourly"), env={schedule_setting("hourly"): "0 * * * *"})
    with pytest.raises(InvalidJobDefinition, match="day-of-month and day-of-week"):
        build_app(jobs("hourly"), env={schedule_setting("hourly"): "0 0 0 1 * MON"})
    with pytest.raises(ConfigurationError, match="unknown function"):
        build_app(jobs("hourly"), env={"CRONWARDEN_FUNCTIONS": "trigger,cron"})


def test_importing_the_function_app_module_imports_no_servicebus_or_tables_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, cronwarden.adapters.azure.functions as f;"
        "print(sorted(m for m in sys.modules if m.startswith(('azure.servicebus',"
        "'azure.data', 'azure.identity'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- end to end -----------------------------------------------------------------------------
def test_tick_to_table_records_in_three_round_trips(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any
) -> None:
    with deployed(jobs("hourly"), azurite, servicebus_emulator, azurite_table) as d:
        d.clock.set(W + timedelta(seconds=1))
        d.host.fire("timer_hourly")
        before = d.store.round_trips
        assert d.host.deliver(wait=5.0) == 1
        worker_round_trips = d.store.round_trips - before
        run = d.store.get(Key(RUN, "hourly", format_window(W)))
        assert run is not None and run.data["state"] == "succeeded"
        status = d.store.get(Key(STATUS, "hourly"))
        assert status is not None and status.data["status"] == "succeeded"
        # Claim + complete are one transaction each; the completion's status Merge raises
        # ``last_success_window_ts`` (a maximum), which Table Storage can only do by reading the
        # status entity first: 3 round trips on Tables (2 on SQLite and Firestore).
        assert worker_round_trips == 3
        assert [c[1] for c in e2e_jobs.calls("hourly")][-1] == f"hourly:{format_window(W)}"
        (settled,) = next(iter(d.host.actions.values())).settled.values()
        assert settled == "complete"
        assert d.host.deliver(wait=0.5) == 0 and d.queue.dlq_depth() == 0


@pytest.mark.parametrize("dedup", [True, False])
def test_a_duplicate_tick_runs_once(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any, dedup: bool
) -> None:
    with deployed(jobs("hourly"), azurite, servicebus_emulator, azurite_table, dedup=dedup) as d:
        d.clock.set(W + timedelta(hours=5, seconds=2))
        window = W + timedelta(hours=5)
        key = f"hourly:{format_window(window)}"
        before = len([c for c in e2e_jobs.calls("hourly") if c[1] == key])
        d.host.fire("timer_hourly")
        d.host.fire("timer_hourly")  # the host fired twice (or a second instance did)
        delivered = 0
        while (got := d.host.deliver(wait=1.5)) > 0:
            delivered += got
        # With duplicate detection the broker drops the second message (same MessageId); without
        # it the claim does: the second delivery finds the run succeeded and is acknowledged.
        assert delivered == (1 if dedup else 2)
        assert len([c for c in e2e_jobs.calls("hourly") if c[1] == key]) == before + 1
        status = d.store.get(Key(STATUS, "hourly"))
        assert status is not None and status.data.get("duplicates", 0) == (0 if dedup else 1)


def test_poison_job_retries_with_backoff_dead_letters_and_redrives_after_a_fix(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any
) -> None:
    e2e_jobs.POISON["on"] = True
    window = W + timedelta(hours=7)
    key = f"poison:{format_window(window)}"
    with deployed(jobs("poison"), azurite, servicebus_emulator, azurite_table) as d:
        d.clock.set(window + timedelta(seconds=1))
        d.host.fire("timer_poison")
        d.deliver_until(lambda: d.queue.dlq_depth() == 1, what="dead letter")
        attempts = [c for c in e2e_jobs.calls("poison") if c[1] == key]
        assert [c[2] for c in attempts] == [1, 2, 3]
        gaps = [b[3] - a[3] for a, b in itertools.pairwise(attempts)]
        assert all(gap >= 0.9 for gap in gaps), gaps  # scheduled re-enqueue, not instant abandon
        (dead,) = d.queue.dlq_peek(10)
        assert dead.reason == "MaxAttemptsExceeded"
        assert "poisoned input" in dead.description and "3 attempt" in dead.description
        assert dead.attributes["run_key"] == key
        run = d.store.get(Key(RUN, "poison", format_window(window)))
        assert run is not None and run.data["state"] == "dead_lettered"

        d.host.fire("watcher")  # the watcher function sees the dead letter
        report = d.runtime.last_report
        assert report is not None and report.dlq_depth == 1
        assert any(a.kind.value == "dead_letters" for a in report.active)

        e2e_jobs.POISON["on"] = False  # the fix is deployed; redrive
        assert d.queue.redrive(10) == 1
        d.deliver_until(
            lambda: (
                (r := d.store.get(Key(RUN, "poison", format_window(window)))) is not None
                and r.data["state"] == "succeeded"
            ),
            what="redriven run succeeded",
        )
        assert d.queue.dlq_depth() == 0
        run = d.store.get(Key(RUN, "poison", format_window(window)))
        assert run is not None and run.data["redrive"] == 1 and run.data["attempt"] == 4


def test_a_run_longer_than_the_lock_duration_keeps_its_message(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any
) -> None:
    with deployed(
        jobs("long"), azurite, servicebus_emulator, azurite_table, lock_duration=2.0
    ) as d:
        d.clock.set(W + timedelta(hours=9, seconds=1))
        key = f"long:{format_window(W + timedelta(hours=9))}"
        d.host.fire("timer_long")
        assert d.host.deliver(wait=5.0) == 1  # runs 3.5 s on a 2 s lock, renewed meanwhile
        (settled,) = next(iter(d.host.actions.values())).settled.values()
        assert settled == "complete"  # the lock was still ours when the run finished
        assert d.host.deliver(wait=1.0) == 0  # and nothing was redelivered
        assert [c[1] for c in e2e_jobs.calls("long")].count(key) == 1


def test_malformed_message_is_dead_lettered_at_once_with_the_reason(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any
) -> None:
    with deployed(jobs("hourly"), azurite, servicebus_emulator, azurite_table) as d:
        d.queue.publish(b"{not json", dedup_id="junk")
        request = RunRequest("no-such-job", W)
        d.queue.publish(request.to_json(), attributes=request_attributes(request))
        d.deliver_until(lambda: d.queue.dlq_depth() == 2, what="two dead letters")
        reasons = Counter(dead.reason for dead in d.queue.dlq_peek(10))
        assert reasons == {"MalformedRequest": 2}


# -- timers: DST, past due, the schedule driver ---------------------------------------------
def _drain(d: Any) -> list[str]:
    keys = []
    while True:
        got = d.queue.receive(10, wait=1.0)
        if not got:
            return keys
        for delivery in got:
            keys.append(delivery.attributes["run_key"])
            d.queue.ack(delivery)


def test_berlin_0200_across_the_march_dst_change_enqueues_one_window_per_day(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any
) -> None:
    # Duplicate detection off: every enqueue is counted, none hidden by the broker.
    with deployed(jobs("berlin"), azurite, servicebus_emulator, azurite_table, dedup=False) as d:
        _, timer = d.host.timers["timer_berlin"]
        assert timer.ncrontab == "0 0 0,1 * * *"
        tick = datetime(2026, 3, 26, 12, 0, tzinfo=UTC)
        end = datetime(2026, 4, 2, 12, 0, tzinfo=UTC)
        fired = 0
        while (tick := timer.next_after(tick)) < end:
            d.clock.set(tick + timedelta(seconds=fired % 3))  # the host is a little late
            d.host.fire("timer_berlin")
            fired += 1
        assert fired == 14  # two UTC ticks a day
        keys = _drain(d)
        assert sorted(keys) == [
            "berlin:2026-03-27T01:00Z",
            "berlin:2026-03-28T01:00Z",
            "berlin:2026-03-29T01:00Z",  # 02:00 does not exist that day: 03:00 CEST
            "berlin:2026-03-30T00:00Z",
            "berlin:2026-03-31T00:00Z",
            "berlin:2026-04-01T00:00Z",
            "berlin:2026-04-02T00:00Z",
        ]


def test_past_due_tick_enqueues_the_latest_due_window(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any
) -> None:
    with deployed(jobs("berlin"), azurite, servicebus_emulator, azurite_table, dedup=False) as d:
        # Summer: the 00:00 UTC tick is the window; the host was down and calls at 05:17 past due.
        d.clock.set(datetime(2026, 6, 10, 5, 17, tzinfo=UTC))
        d.host.fire("timer_berlin")  # not past due: nothing came due since the 01:00 tick
        d.host.fire("timer_berlin", past_due=True)
        assert _drain(d) == ["berlin:2026-06-10T00:00Z"]


def test_schedule_driver_plays_the_host_timer_through_the_runtime_scheduler(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any
) -> None:
    with deployed(jobs("kolkata"), azurite, servicebus_emulator, azurite_table) as d:
        start = datetime(2026, 5, 1, 0, 0, 30, tzinfo=UTC)
        t0 = time.monotonic()
        speed = 1800.0  # virtual seconds per real second: a tick every 2 s

        def virtual() -> datetime:
            return start + timedelta(seconds=(time.monotonic() - t0) * speed)

        d.host.clock = virtual
        d.runtime.clock = virtual
        d.host.past_due_after = timedelta(hours=1)
        stop = threading.Event()
        driver = d.host.scheduler(stop, max_sleep=0.05)
        driver.start()
        try:
            d.deliver_until(lambda: len(_runs(d, "kolkata")) >= 2, deadline=30, what="two runs")
        finally:
            stop.set()
            driver.join(timeout=5)
        runs = _runs(d, "kolkata")
        # "30 * * * *" in Asia/Kolkata (UTC+05:30) is minute 0 of every UTC hour.
        assert all(w.endswith(":00Z") for w in runs)
        assert all(r["state"] == "succeeded" for r in runs.values())


def _runs(d: Any, job: str) -> dict[str, dict[str, Any]]:
    return {r.key.id: r.data for r in d.store.query(RUN, job)}


# -- the SDK-type binding (azurefunctions-extensions-bindings-servicebus) -------------------
@pytest.fixture
def settlement_extension(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A stand-in for the extension's module (not installable here: it needs uamqp + grpc):
    the same names, the SDK message type, an actions type the worker's signature names."""
    import importlib.machinery
    import types

    from azure.servicebus import ServiceBusReceivedMessage

    names = [
        "azurefunctions",
        "azurefunctions.extensions",
        "azurefunctions.extensions.bindings",
        "azurefunctions.extensions.bindings.servicebus",
    ]
    for name in names:
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        monkeypatch.setitem(sys.modules, name, module)
    ext = sys.modules[names[-1]]
    ext.ServiceBusReceivedMessage = type(  # type: ignore[attr-defined]
        "ServiceBusReceivedMessage", (ServiceBusReceivedMessage,), {}
    )
    ext.ServiceBusMessageActions = type("ServiceBusMessageActions", (), {})  # type: ignore[attr-defined]
    return ext


def test_with_the_settlement_extension_the_worker_uses_the_sdk_type_binding(
    azurite: Azurite, azurite_table: str, servicebus_emulator: Any, settlement_extension: Any
) -> None:
    from cronwarden.adapters.azure.functions import settlement_extension_installed

    assert settlement_extension_installed()
    found = bindings(build_app(jobs("poison")))
    (sb,) = found["worker"]
    assert sb["type"] == "serviceBusTrigger" and sb["autoCompleteMessages"] is False
    e2e_jobs.POISON["on"] = True
    window = W + timedelta(hours=11)
    key = f"poison:{format_window(window)}"
    with deployed(jobs("poison"), azurite, servicebus_emulator, azurite_table) as d:
        (worker,) = d.host.queue_triggers
        assert list(inspect.signature(worker[0]).parameters) == ["message", "message_actions"]
        d.clock.set(window + timedelta(seconds=1))
        d.host.fire("timer_poison")
        d.deliver_until(lambda: d.queue.dlq_depth() == 1, what="dead letter")
        # The SDK message's AMQP count starts at 0: attempts still count 1, 2, 3.
        assert [c[2] for c in e2e_jobs.calls("poison") if c[1] == key] == [1, 2, 3]
        (dead,) = d.queue.dlq_peek(1)
        assert dead.reason == "MaxAttemptsExceeded"
