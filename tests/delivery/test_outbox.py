"""Every alert transition reaches every channel it is routed to, once, whatever the channel
does meanwhile (answers 500, refuses connections) and however many watchers run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cronwarden import Watcher
from cronwarden.model.ports import Merge
from cronwarden.model.records import DELIVERIES, status_key_of
from cronwarden.watch.alerting.channels import SlackWebhook
from cronwarden.watch.alerting.routing import Route, Router
from cronwarden.watch.health import Alert
from cronwarden.watch.outbox import UNROUTED, DeliveryPolicy
from tests.support.harness import FakeClock, Harness, at

from .conftest import Sink

FAST = DeliveryPolicy(backoff=timedelta(seconds=30), max_backoff=timedelta(minutes=2))


def router(sink: Sink, *names: str, owners: tuple[str, ...] = ()) -> Router:
    return Router([Route.of(SlackWebhook(n, sink.url(f"/{n}")), owners) for n in names])


def watcher(h: Harness, clock: FakeClock, *notifiers: Any, **kw: Any) -> Watcher:
    return Watcher(h.jobs, h.store, h.queue, notifiers=list(notifiers), clock=clock, hooks=[], **kw)


def outbox(h: Harness, job: str) -> list[dict[str, Any]]:
    record = h.store.get(status_key_of(job))
    return list((record.data if record else {}).get(DELIVERIES) or [])


def ids(bodies: list[dict[str, Any]]) -> list[str]:
    return [b["alert"]["delivery_id"] for b in bodies]


def fire_missed(w: Watcher, clock: FakeClock) -> None:
    w.check()  # first sight of both jobs: nothing due yet
    clock.set(at("2026-01-20T13:00:30Z"))  # two hours later: both jobs missed windows


def test_a_channel_answering_500_gets_the_alert_once_it_answers_again(
    h: Harness, clock: FakeClock, sink: Sink
) -> None:
    w = watcher(h, clock, router(sink, "chat"), delivery=FAST)
    fire_missed(w, clock)
    sink.code = 500
    report = w.check()
    assert {a.job for a in report.fired} == {"billing", "reports"}
    assert sink.received == []
    (entry,) = outbox(h, "billing")
    slot = entry["to"]["chat"]
    assert slot["state"] == "pending" and slot["attempts"] == 1 and "HTTP 500" in slot["error"]
    assert [line.split(":")[0] for line in w.deliveries.lines()] == [
        "UNDELIVERED billing",
        "UNDELIVERED reports",
    ]
    w.check()  # within the backoff: no second attempt yet
    assert outbox(h, "billing")[0]["to"]["chat"]["attempts"] == 1
    sink.code = 200
    clock.advance(timedelta(seconds=31))
    w.check()
    bodies = sink.at("/chat")
    assert sorted(b["alert"]["job"] for b in bodies) == ["billing", "reports"]
    assert entry["id"] in ids(bodies)
    assert outbox(h, "billing") == [] and outbox(h, "reports") == []
    assert w.deliveries.lines() == []
    assert w.deliveries.results.counts[("chat", "delivered")] == 2
    clock.advance(timedelta(minutes=5))
    w.check()
    assert len(sink.at("/chat")) == 2  # nothing sent twice


def test_chaos_channel_down_three_watchers_every_transition_once_per_channel(
    h: Harness, clock: FakeClock, sink: Sink
) -> None:
    pager = Sink()
    pager.up()
    try:
        # each watcher as its own process would build it: its own router and channels
        ws = [
            watcher(
                h,
                clock,
                Router(
                    [
                        Route.of(SlackWebhook("chat", sink.url("/chat"))),
                        Route.of(SlackWebhook("pager", pager.url("/pager"))),
                    ]
                ),
                delivery=FAST,
            )
            for _ in range(3)
        ]
        ws[0].check()
        clock.set(at("2026-01-20T13:00:30Z"))
        pager.down()  # connections refused
        turn = 0

        def check() -> Watcher:
            nonlocal turn
            w = ws[turn % 3]
            turn += 1
            w.check()
            clock.advance(timedelta(minutes=1))
            return w

        for step in range(8):  # transitions while the pager is down
            if step == 2:
                h.store.commit([Merge(status_key_of("billing"), {"consecutive_failures": 5})])
            if step == 5:
                h.store.commit([Merge(status_key_of("billing"), {"consecutive_failures": 0})])
            w = check()
        assert pager.received == []
        lines = w.deliveries.lines()
        assert any("to pager FAILING" in line for line in lines), lines
        pager.up()  # back, on the same port
        for _ in range(8):
            check()
    finally:
        pager.down()
    chat = sink.at("/chat")
    escalations = [b for b in chat if b["alert"].get("delivery_failing")]
    transitions = [b for b in chat if not b["alert"].get("delivery_failing")]
    assert escalations and all(b["alert"]["delivery_failing"] == "pager" for b in escalations)
    assert sorted(
        (b["alert"]["job"], b["alert"]["alert"], b["alert"]["state"]) for b in transitions
    ) == [
        ("billing", "failing", "firing"),
        ("billing", "failing", "recovered"),
        ("billing", "missed", "firing"),
        ("reports", "missed", "firing"),
    ]
    pages = pager.at("/pager")
    assert sorted(ids(pages)) == sorted(ids(transitions))  # each once, none lost
    assert len(set(ids(chat))) == len(chat)  # nothing twice on chat either
    assert outbox(h, "billing") == [] and outbox(h, "reports") == []


def test_an_unrouted_alert_waits_for_a_channel(
    h: Harness, clock: FakeClock, sink: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    lonely = watcher(h, clock)  # no channel at all (as `cronwarden run --once`)
    fire_missed(lonely, clock)
    assert lonely.check().fired
    (entry,) = outbox(h, "billing")
    assert list(entry["to"]) == [UNROUTED]
    assert "no channel takes it" in lonely.deliveries.lines()[0]
    # a channel for team-pay only: billing's alert goes out, reports' keeps waiting
    w = watcher(h, clock, router(sink, "pay", owners=("team-pay",)))
    clock.advance(timedelta(minutes=1))
    w.check()
    assert [b["alert"]["job"] for b in sink.at("/pay")] == ["billing"]
    h.store.commit([Merge(status_key_of("reports"), {"consecutive_failures": 9})])
    clock.advance(timedelta(minutes=1))
    w.check()  # reports now fails too: no route takes it, said at once in the log
    assert any(
        "reports" in r.getMessage() and "matches no channel" in r.getMessage()
        for r in caplog.records
    )
    assert [list(e["to"]) for e in outbox(h, "reports")] == [[UNROUTED], [UNROUTED]]
    assert ids(sink.at("/pay")) == [entry["id"]]
    assert outbox(h, "billing") == []
    w.check()
    assert len(sink.received) == 1


class Crash(BaseException):
    """The process dies: nothing after it runs."""


class SendThenCrash:
    """Posts the alert, then the process dies before the delivery is marked."""

    name = "chat"

    def __init__(self, channel: SlackWebhook) -> None:
        self.channel = channel

    def deliver(self, alert: Alert) -> None:
        self.channel.deliver(alert)
        raise Crash


def test_a_crash_between_send_and_mark_resends_after_the_claim_with_the_same_id(
    h: Harness, clock: FakeClock, sink: Sink
) -> None:
    dying = watcher(h, clock, SendThenCrash(SlackWebhook("chat", sink.url("/chat"))))
    fire_missed(dying, clock)
    with pytest.raises(Crash):
        dying.check()
    first = sink.at("/chat")
    assert len(first) == 1
    survivor = watcher(h, clock, router(sink, "chat"))
    clock.advance(timedelta(minutes=1))  # the claim (2 minutes) still holds
    survivor.check()
    assert sink.at("/chat") == first  # the dead watcher's claims hold: nothing sent twice yet
    clock.advance(timedelta(minutes=2))
    survivor.check()
    bodies = sink.at("/chat")
    crashed = first[0]["alert"]["job"]
    again = [b for b in bodies if b["alert"]["job"] == crashed]
    assert len(again) == 2 and again[0]["alert"]["delivery_id"] == again[1]["alert"]["delivery_id"]
    assert outbox(h, "billing") == [] and outbox(h, "reports") == []
    survivor.check()
    assert len(sink.at("/chat")) == len(bodies)


def test_an_expired_delivery_is_given_up_loudly(
    h: Harness, clock: FakeClock, sink: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    sink.code = 500
    w = watcher(h, clock, router(sink, "chat"), delivery=DeliveryPolicy(expiry=timedelta(hours=1)))
    fire_missed(w, clock)
    w.check()
    clock.advance(timedelta(hours=2))
    w.check()
    assert outbox(h, "billing") == []
    assert w.deliveries.results.counts[("chat", "expired")] == 2
    assert any("never reached chat" in r.getMessage() for r in caplog.records)


def test_three_watchers_checking_at_once_send_each_transition_once(
    h: Harness, clock: FakeClock, sink: Sink
) -> None:
    import threading

    ws = [watcher(h, clock, router(sink, "chat"), delivery=FAST) for _ in range(3)]
    fire_missed(ws[0], clock)
    sink.code = 500
    errors: list[BaseException] = []

    def rounds(w: Watcher, gate: threading.Barrier) -> None:
        try:
            for _ in range(6):
                gate.wait(10)  # all three check together
                w.check()
                gate.wait(10)  # then the main thread moves the clock
        except BaseException as exc:
            errors.append(exc)

    gate = threading.Barrier(4)
    threads = [threading.Thread(target=rounds, args=(w, gate)) for w in ws]
    for thread in threads:
        thread.start()
    for step in range(6):
        if step == 3:
            sink.code = 200  # the channel comes back
        gate.wait(10)
        gate.wait(10)
        clock.advance(timedelta(minutes=1))
    for thread in threads:
        thread.join(10)
    assert errors == []
    bodies = sink.at("/chat")
    assert sorted(b["alert"]["job"] for b in bodies) == ["billing", "reports"]
    assert len(set(ids(bodies))) == 2
    assert outbox(h, "billing") == [] and outbox(h, "reports") == []


def test_a_job_changing_state_every_check_does_not_starve_its_older_retries(
    h: Harness, clock: FakeClock, sink: Sink
) -> None:
    w = watcher(h, clock, router(sink, "chat"), delivery=FAST)
    fire_missed(w, clock)
    sink.code = 500
    w.check()  # missed fires for both jobs; chat answers 500
    for step in range(6):  # billing fails and recovers on every check
        if step == 2:
            sink.code = 200
        failures = 5 if step % 2 == 0 else 0
        h.store.commit([Merge(status_key_of("billing"), {"consecutive_failures": failures})])
        clock.advance(timedelta(minutes=1))
        report = w.check()
        assert report.fired or report.recovered  # a transition on every check
    assert outbox(h, "billing") == []  # the last check was a transition, and still delivered
    bodies = sink.at("/chat")
    assert len(set(ids(bodies))) == len(bodies) == 2 + 6  # 2 missed, 6 failing / recovered


def test_the_outbox_is_bounded_and_says_what_it_drops(
    h: Harness, clock: FakeClock, sink: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    from cronwarden.watch.outbox import MAX_ENTRIES

    sink.down()  # refused, for the whole test
    w = watcher(h, clock, router(sink, "chat"), delivery=FAST)
    fire_missed(w, clock)
    for step in range(MAX_ENTRIES + 3):
        failures = 5 if step % 2 == 0 else 0
        h.store.commit([Merge(status_key_of("billing"), {"consecutive_failures": failures})])
        w.check()
        clock.advance(timedelta(seconds=10))
    assert len(outbox(h, "billing")) == MAX_ENTRIES
    dropped = [r for r in caplog.records if "outbox of billing is full" in r.getMessage()]
    assert len(dropped) == 4  # missed + 35 flaps = 36 transitions, 32 kept
