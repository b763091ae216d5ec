"""Consumer declarations, event keys, schemas and the event request wire format; dependency
graph validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cronwarden.jobs import check_dependencies
from cronwarden.jobs.consumers import (
    EventConsumer,
    MalformedEvent,
    consumer,
    decode_event_request,
    event_slot,
    publish,
)
from cronwarden.model.errors import InvalidJobDefinition, MalformedRunRequest
from cronwarden.testing import MemoryQueue

SCHEMA = {
    "type": "object",
    "required": ["invoice_id"],
    "properties": {"invoice_id": {"type": "string", "minLength": 1}, "amount": {"type": "number"}},
}


def _render() -> EventConsumer:
    @consumer("invoice-render", key=lambda e: e["invoice_id"], max_runtime="5m", schema=SCHEMA)
    def render(ctx: Any) -> None:
        """Render one invoice."""

    return render


def test_declaration_is_checked_at_import() -> None:
    render = _render()
    assert (render.name, render.description, render.overlap.value) == (
        "invoice-render",
        "Render one invoice.",
        "skip",
    )
    cases: list[tuple[dict[str, Any], str]] = [
        ({"key": "id", "max_runtime": "1m", "schema": {"type": "nope"}}, "not a valid JSON Schema"),
        ({"key": 42, "max_runtime": "1m"}, "key must be a function of the event or a field name"),
        ({"key": "id", "max_runtime": "0s"}, "max_runtime must be positive"),
        ({"key": "id", "max_runtime": "1m", "overlap": "queue"}, "overlap must be one of"),
        ({"key": "id", "max_runtime": "1m", "at_least": (0, "1h")}, "at_least count"),
        ({"key": "id", "max_runtime": "1m", "at_least": "often"}, "at_least must be"),
    ]
    for options, message in cases:
        with pytest.raises(InvalidJobDefinition, match=message):
            consumer("c", **options)
    with pytest.raises(InvalidJobDefinition, match="consumer name 'Bad_Name'"):
        consumer("Bad_Name", key="id", max_runtime="1m")
    rated = consumer("c", key="id", max_runtime="1m", at_least=(10, "1h"))(lambda ctx: None)
    assert str(rated.at_least) == "at least 10 per 1h"


def test_the_key_comes_from_the_event() -> None:
    render = _render()
    assert render.check({"invoice_id": "inv-42", "amount": 10}) == "inv-42"
    by_field = consumer("c", key="order", max_runtime="1m")(lambda ctx: None)
    assert by_field.check({"order": 7}) == "7"
    with pytest.raises(MalformedEvent, match=r"the key function failed.*no field 'order'"):
        by_field.check({"id": 7})
    with pytest.raises(MalformedEvent, match="must be text or an integer, got NoneType"):
        consumer("c", key=lambda e: None, max_runtime="1m")(lambda ctx: None).check({})
    with pytest.raises(MalformedEvent, match="must be 1-512 characters, got 0"):
        consumer("c", key=lambda e: "", max_runtime="1m")(lambda ctx: None).check({})


def test_schema_is_checked_with_the_reason() -> None:
    render = _render()
    with pytest.raises(MalformedEvent, match=r"does not match the schema at \$: 'invoice_id'"):
        render.check({"amount": 3})
    with pytest.raises(MalformedEvent, match=r"at \$\['amount'\]: 'ten' is not of type 'number'"):
        render.check({"invoice_id": "a", "amount": "ten"})
    with pytest.raises(MalformedEvent, match="the event is not JSON"):
        render.check({"invoice_id": "a", "when": object()})
    assert issubclass(MalformedEvent, MalformedRunRequest)  # workers dead-letter these


def test_slots_are_store_safe_and_never_look_like_windows() -> None:
    assert event_slot("inv-42") == "e:inv-42"
    hashed = event_slot("customers/42#eu?x")
    assert hashed.startswith("h:") and len(hashed) == 42
    assert event_slot("customers/42#eu?x") == hashed  # stable across processes
    assert event_slot("x" * 101).startswith("h:")


def test_duplicates_of_one_event_are_one_run_key_and_travel_deduplicated() -> None:
    render, queue = _render(), MemoryQueue()
    keys = {publish(render, {"invoice_id": "inv-7", "amount": n}, publisher=queue) for n in (1, 1)}
    assert keys == {"invoice-render:e:inv-7"}
    (delivery,) = queue.receive(10)  # MemoryQueue deduplicates by dedup_id
    request = decode_event_request(delivery.body, {"invoice-render": render})
    assert (request.key, request.run_key, request.event) == (
        "inv-7",
        "invoice-render:e:inv-7",
        {"invoice_id": "inv-7", "amount": 1},
    )
    with pytest.raises(MalformedEvent):
        publish(render, {"amount": 1}, publisher=queue)
    assert queue.receive(10) == []  # nothing was sent for the malformed event


def test_a_different_event_under_the_same_key_is_not_dropped_by_the_broker() -> None:
    # a broker that deduplicates must drop copies only: the claim dead-letters the other
    # event as PayloadMismatch (docs/events.md), which needs it delivered
    render, queue = _render(), MemoryQueue()
    first = publish(render, {"invoice_id": "inv-8", "amount": 10}, publisher=queue)
    second = publish(render, {"invoice_id": "inv-8", "amount": 99}, publisher=queue)
    assert first == second == "invoice-render:e:inv-8"
    got = queue.receive(10)
    assert sorted(json.loads(d.body)["event"]["amount"] for d in got) == [10, 99]


def test_received_requests_are_checked_again() -> None:
    render = _render()
    good = json.loads(render.request({"invoice_id": "a"}).to_json())
    consumers = {"invoice-render": render}

    def decode(**changes: Any) -> None:
        decode_event_request(json.dumps({**good, **changes}), consumers)

    with pytest.raises(MalformedEvent, match="the key comes from the event"):
        decode(key="b")
    with pytest.raises(MalformedEvent, match="does not match the schema"):
        decode(event={"invoice_id": ""})
    with pytest.raises(MalformedEvent, match="unknown consumer 'other'"):
        decode(consumer="other")
    with pytest.raises(MalformedEvent, match="run_key"):
        decode(run_key="invoice-render:e:zzz")
    with pytest.raises(MalformedEvent, match="not an event request"):
        decode(kind="window")
    with pytest.raises(MalformedEvent, match="not JSON"):
        decode_event_request(b"{", consumers)


def test_dependency_graphs() -> None:
    check_dependencies({"export": [], "report": ["export"], "mail": ["report", "export"]})
    with pytest.raises(InvalidJobDefinition) as unknown:
        check_dependencies({"export": [], "report": ["exprot"]})
    assert str(unknown.value) == "report: after 'exprot': no such job (known: export, report)"
    with pytest.raises(InvalidJobDefinition) as cycle:
        check_dependencies({"a": ["c"], "b": ["a"], "c": ["b"], "d": []})
    assert str(cycle.value) == "dependency cycle: a -> b -> c -> a"
    with pytest.raises(InvalidJobDefinition, match="dependency cycle: a -> a"):
        check_dependencies({"a": ["a"]})
