"""The run protocol in one process on the local provider: outcomes, round trips, ledger,
checkpoints, retries to the dead-letter queue, redrive, malformed input, overlap policies."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import cronwarden
from cronwarden import OutcomeKind, RunContext, RunRequest, Uncertain
from cronwarden.model.errors import FingerprintMismatch, LeaseLost, PermanentError
from cronwarden.model.ports import LOCK, RUN, STATUS, Key, Merge
from cronwarden.run.ledger import item_records
from tests.support.harness import FakeClock, Harness, at, harness

W = at("2026-01-20T02:00Z")


def hourly(name: str, handler, **kw):  # type: ignore[no-untyped-def]
    options = {"max_runtime": "5m", **kw}
    return cronwarden.job(name, cron="0 * * * *", **options)(handler)


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    calls: list[str] = []

    def ok(ctx: RunContext) -> None:
        calls.append(ctx.run_key)

    made = harness(tmp_path, [hourly("ok", ok)])
    made.calls = calls  # type: ignore[attr-defined]
    yield made
    made.close()


def test_happy_path_costs_two_round_trips_and_records_status(h: Harness) -> None:
    before = h.store.round_trips
    outcome = h.engine.execute(RunRequest("ok", W))
    assert outcome.kind is OutcomeKind.SUCCEEDED
    assert h.store.round_trips - before == 2  # claim, complete
    run = h.store.get(Key(RUN, "ok", "2026-01-20T02:00Z"))
    assert run is not None and run.data["state"] == "succeeded" and run.data["fence"] == 1
    assert h.store.get(Key(LOCK, "ok")) is None  # lock released
    status = h.store.get(Key(STATUS, "ok"))
    assert status is not None
    for name in (
        "job_name",
        "run_id",
        "started_at",
        "finished_at",
        "status",
        "duration_ms",
        "last_success_at",
        "consecutive_failures",
        "skips_since_success",
    ):
        assert name in status.data, name
    assert status.data["status"] == "succeeded"
    assert status.data["last_success_window_ts"] == int(W.timestamp())
    assert status.data["error_snippet"] is None


def test_second_delivery_of_finished_run_is_duplicate(h: Harness) -> None:
    assert h.engine.execute(RunRequest("ok", W)).kind is OutcomeKind.SUCCEEDED
    again = h.engine.execute(RunRequest("ok", W))
    assert again.kind is OutcomeKind.DUPLICATE and again.settle.value == "ack"
    assert h.calls == ["ok:2026-01-20T02:00Z"]  # type: ignore[attr-defined]


def test_window_must_be_on_the_schedule(h: Harness) -> None:
    with pytest.raises(cronwarden.CronwardenError, match="not a window"):
        h.engine.execute(RunRequest("ok", at("2026-01-20T02:30Z")))


def test_success_window_is_plain_for_the_current_window_and_never_lowered(
    tmp_path: Path,
) -> None:
    """A run claimed well before its next window writes the success window as a plain field
    (Table Storage needs no read for it); a late catch-up of an older window writes it as a
    maximum, so it never lowers what a newer window recorded."""
    clock = FakeClock(W + timedelta(hours=1, seconds=5))
    made = harness(tmp_path, [hourly("ok", lambda ctx: None)], clock=clock)
    merges: list[Merge] = []
    commit = made.store.commit

    def recording(ops):  # type: ignore[no-untyped-def]
        merges.extend(op for op in ops if isinstance(op, Merge) and op.key.kind == STATUS)
        return commit(ops)

    made.store.commit = recording  # type: ignore[method-assign]
    try:
        newer, older = W + timedelta(hours=1), W
        assert made.engine.execute(RunRequest("ok", newer)).kind is OutcomeKind.SUCCEEDED
        assert merges[-1].fields["last_success_window_ts"] == int(newer.timestamp())
        assert not merges[-1].maximums
        clock.advance(60)
        catch_up = RunRequest("ok", older, reason="catch_up")
        assert made.engine.execute(catch_up).kind is OutcomeKind.SUCCEEDED
        assert "last_success_window_ts" not in merges[-1].fields
        assert merges[-1].maximums == {"last_success_window_ts": int(older.timestamp())}
        status = made.store.get(Key(STATUS, "ok"))
        assert status is not None
        assert status.data["last_success_window_ts"] == int(newer.timestamp())
    finally:
        made.close()


def test_ledger_round_trips_are_one_per_batch(tmp_path: Path) -> None:
    def fan(ctx: RunContext) -> None:
        for _ in ctx.items(range(250)):
            pass

    made = harness(tmp_path, [hourly("fan", fan)], batch_size=100)
    try:
        before = made.store.round_trips
        outcome = made.engine.execute(RunRequest("fan", W))
        assert outcome.kind is OutcomeKind.SUCCEEDED
        assert outcome.counters["items_done"] == 250
        assert made.store.round_trips - before == 2 + 3
        items = item_records(made.store, "fan")
        assert len(items) == 250 and {r.data["state"] for r in items} == {"done"}
        assert all("expire_at" in r.data for r in items)
    finally:
        made.close()


def test_failed_attempt_resumes_with_done_items_skipped(tmp_path: Path) -> None:
    seen: list[tuple[int, str, bool]] = []
    fail_at = {"n": 7}

    def fan(ctx: RunContext) -> None:
        for item in ctx.items(range(10), batch_size=3):
            if item.value == fail_at["n"]:
                fail_at["n"] = -1
                raise RuntimeError("downstream timeout")
            seen.append((item.value, item.idempotency_key, item.uncertain))

    made = harness(tmp_path, [hourly("fan", fan, retry=cronwarden.Retry(3, 0, 0))])
    try:
        first = made.engine.execute(RunRequest("fan", W))
        assert first.kind is OutcomeKind.FAILED and first.settle.value == "retry"
        second = made.engine.execute(RunRequest("fan", W))
        assert second.kind is OutcomeKind.SUCCEEDED
        values = [v for v, _, _ in seen]
        assert values == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # 0-6 once, then 7.. on the retry
        keys = {v: k for v, k, _ in seen}
        assert len(set(keys.values())) == 10
        assert second.counters["items_skipped_done"] == 7
        run = made.store.get(Key(RUN, "fan", "2026-01-20T02:00Z"))
        assert run is not None and run.data["attempt"] == 2 and run.data["fence"] == 2
    finally:
        made.close()


def test_item_with_changed_input_is_a_fingerprint_error(tmp_path: Path) -> None:
    data = {"a": 1}

    def fan(ctx: RunContext) -> None:
        for item in ctx.items([{"id": "x", **data}], key="id"):
            if data["a"] == 1:
                raise RuntimeError("first attempt fails after the item")
            del item

    made = harness(tmp_path, [hourly("fan", fan)])
    try:
        assert made.engine.execute(RunRequest("fan", W)).kind is OutcomeKind.FAILED
        data["a"] = 2
        outcome = made.engine.execute(RunRequest("fan", W))
        assert outcome.kind is OutcomeKind.DEAD_LETTERED  # permanent: retrying cannot help
        assert outcome.reason == "PermanentError" and "FingerprintMismatch" in outcome.detail
    finally:
        made.close()
    assert issubclass(FingerprintMismatch, PermanentError)


def test_same_run_key_with_other_payload_is_rejected(h: Harness) -> None:
    assert h.engine.execute(RunRequest("ok", W, payload={"x": 1})).kind is OutcomeKind.SUCCEEDED
    outcome = h.engine.execute(RunRequest("ok", W, payload={"x": 2}))
    assert outcome.kind is OutcomeKind.REJECTED and outcome.reason == "PayloadMismatch"
    assert outcome.settle.value == "dead_letter"


def test_uncertain_items_can_be_quarantined(tmp_path: Path) -> None:
    def fan(ctx: RunContext) -> None:
        for item in ctx.items(range(4), batch_size=4):
            if item.value == 2 and ctx.attempt == 1:
                raise RuntimeError("crash mid-item")

    made = harness(tmp_path, [hourly("fan", fan)], uncertain=Uncertain.QUARANTINE)
    try:
        made.engine.execute(RunRequest("fan", W))
        outcome = made.engine.execute(RunRequest("fan", W))
        assert outcome.kind is OutcomeKind.SUCCEEDED
        assert outcome.counters.get("items_quarantined") == 1
        states = {r.data["key"]: r.data["state"] for r in item_records(made.store, "fan")}
        # 2 was in progress when the attempt died: uncertain. 3 was claimed but never started:
        # released by the failure commit, so the retry simply does it.
        assert states == {"0": "done", "1": "done", "2": "quarantined", "3": "done"}
    finally:
        made.close()


def test_checkpoint_survives_a_failed_attempt(tmp_path: Path) -> None:
    seen = []

    def job(ctx: RunContext) -> None:
        seen.append(ctx.checkpoint)
        ctx.save_checkpoint({"cursor": 42})
        if ctx.attempt == 1:
            raise RuntimeError("boom")
        with pytest.raises(ValueError, match="over 32768 bytes"):
            ctx.save_checkpoint({"blob": "x" * 40000})

    made = harness(tmp_path, [hourly("cp", job)])
    try:
        made.engine.execute(RunRequest("cp", W))
        assert made.engine.execute(RunRequest("cp", W)).kind is OutcomeKind.SUCCEEDED
        assert seen == [None, {"cursor": 42}]
        run = made.store.get(Key(RUN, "cp", "2026-01-20T02:00Z"))
        assert run is not None and run.data["checkpoint"] == {"cursor": 42}
    finally:
        made.close()


def test_poison_job_retries_with_backoff_then_dead_letters_then_redrives(tmp_path: Path) -> None:
    broken = {"on": True}
    attempts: list[int] = []

    def poison(ctx: RunContext) -> None:
        attempts.append(ctx.attempt)
        if broken["on"]:
            raise ValueError("bad row 17 (password=hunter2)")

    made = harness(
        tmp_path,
        [hourly("poison", poison, retry=cronwarden.Retry(3, min_backoff=0.2, max_backoff=0.4))],
    )
    try:
        made.trigger.tick("poison", W)
        deliveries = 0
        while made.queue.dlq_depth() == 0 and deliveries < 10:
            deliveries += made.worker.poll(wait=2.0)
        assert attempts == [1, 2, 3]
        (dead,) = made.queue.dlq_peek()
        assert dead.reason == "MaxAttemptsExceeded"
        assert "ValueError" in dead.description and "hunter2" not in dead.description
        status = made.store.get(Key(STATUS, "poison"))
        assert status is not None
        assert status.data["consecutive_failures"] == 3
        assert status.data["status"] == "dead_lettered"
        assert "hunter2" not in json.dumps(status.data)
        run = made.store.get(Key(RUN, "poison", "2026-01-20T02:00Z"))
        assert run is not None and run.data["state"] == "dead_lettered"

        broken["on"] = False
        assert made.queue.redrive(10) == 1
        made.worker.poll(wait=2.0)
        assert attempts == [1, 2, 3, 4]
        assert made.queue.dlq_depth() == 0
        run = made.store.get(Key(RUN, "poison", "2026-01-20T02:00Z"))
        assert run is not None and run.data["state"] == "succeeded"
        assert run.data["redrive"] == 1
    finally:
        made.close()


def test_backoff_is_exponential_and_bounded() -> None:
    retry = cronwarden.Retry(max_attempts=6, min_backoff="1s", max_backoff="5s")
    assert [retry.backoff(n).total_seconds() for n in range(1, 6)] == [1, 2, 4, 5, 5]


@pytest.mark.parametrize(
    ("body", "reason_part"),
    [
        (b"not json", "not JSON"),
        (b"[1,2]", "JSON object"),
        (b'{"v":1,"job":5,"window":"2026-01-20T02:00Z"}', "job"),
        (b'{"v":1,"job":"nope","window":"2026-01-20T02:00Z"}', "unknown job"),
        (b'{"v":1,"job":"ok","window":"yesterday"}', "window"),
        (b'{"v":1,"job":"ok","window":"2026-01-20T02:30Z"}', "not a window"),
        (b'{"v":2,"job":"ok","window":"2026-01-20T02:00Z"}', "version"),
        (b"\xff\xfe\x00binary", "UTF-8"),
        (
            b'{"v":1,"job":"ok","window":"2026-01-20T02:00Z","pad":"' + b"x" * 70000 + b'"}',
            "over the limit",
        ),
    ],
)
def test_malformed_requests_are_dead_lettered_and_worker_keeps_serving(
    h: Harness, body: bytes, reason_part: str
) -> None:
    h.queue.publish(body)
    h.trigger.tick("ok", W)
    assert h.worker.poll(max_messages=10, wait=1.0) == 2
    (dead,) = h.queue.dlq_peek()
    assert dead.reason == "MalformedRequest"
    assert reason_part in dead.description
    assert h.calls == ["ok:2026-01-20T02:00Z"]  # type: ignore[attr-defined]


def _hold(release: threading.Event, started: threading.Event):  # type: ignore[no-untyped-def]
    def handler(ctx: RunContext) -> None:
        started.set()
        while not release.is_set():
            ctx.sleep(0.01)

    return handler


@pytest.mark.parametrize("policy", ["defer", "fail"])
def test_overlap_policies_defer_and_fail(tmp_path: Path, policy: str) -> None:
    release, started = threading.Event(), threading.Event()
    made = harness(tmp_path, [hourly("hold", _hold(release, started), overlap=policy)])
    try:
        runner = threading.Thread(target=made.engine.execute, args=(RunRequest("hold", W),))
        runner.start()
        assert started.wait(10)
        outcome = made.engine.execute(RunRequest("hold", W + timedelta(hours=1)))
        release.set()
        runner.join(10)
        if policy == "defer":
            assert outcome.kind is OutcomeKind.DEFERRED and outcome.settle.value == "retry"
            assert outcome.delay > 0
        else:
            assert outcome.kind is OutcomeKind.OVERLAP_FAILED
            status = made.store.get(Key(STATUS, "hold"))
            assert status is not None and "overlap refused" in status.data["last_error"]
        assert "lock" not in outcome.detail or "run" in outcome.detail
    finally:
        release.set()
        made.close()


def test_shutdown_cancels_cooperatively(tmp_path: Path) -> None:
    release, started = threading.Event(), threading.Event()
    made = harness(tmp_path, [hourly("hold", _hold(release, started))])
    result = {}
    try:
        runner = threading.Thread(
            target=lambda: result.setdefault("o", made.engine.execute(RunRequest("hold", W)))
        )
        runner.start()
        assert started.wait(10)
        made.engine.shutdown()
        runner.join(10)
        assert result["o"].kind is OutcomeKind.FAILED and result["o"].reason == "Cancelled"
        assert made.store.get(Key(LOCK, "hold")) is None
    finally:
        release.set()
        made.close()


def test_lease_lost_stops_the_handler_and_writes_nothing(tmp_path: Path) -> None:
    from cronwarden.model.ports import Update

    started, go_on = threading.Event(), threading.Event()
    made_box: dict[str, Harness] = {}

    def steal(ctx: RunContext) -> None:
        started.set()
        assert go_on.wait(10)
        ctx.save_checkpoint({"late": True})  # must be refused

    made = harness(tmp_path, [hourly("steal", steal)])
    made_box["h"] = made
    result = {}
    try:
        runner = threading.Thread(
            target=lambda: result.setdefault("o", made.engine.execute(RunRequest("steal", W)))
        )
        runner.start()
        assert started.wait(10)
        key = Key(RUN, "steal", "2026-01-20T02:00Z")
        record = made.store.get(key)
        assert record is not None
        made.store.commit(
            [Update(key, {**record.data, "owner": "thief", "fence": 2}, record.version)]
        )
        go_on.set()
        runner.join(10)
        assert result["o"].kind is OutcomeKind.LEASE_LOST
        final = made.store.get(key)
        assert final is not None and final.data["owner"] == "thief"
        assert final.data["checkpoint"] is None
    finally:
        go_on.set()
        made.close()
    assert issubclass(LeaseLost, cronwarden.CronwardenError)


def test_logs_are_json_lines_with_run_id(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    from cronwarden.model.logs import JsonFormatter

    with caplog.at_level(logging.INFO, logger="cronwarden"):
        outcome = h.engine.execute(RunRequest("ok", W))
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records]
    events = [line["event"] for line in lines]
    assert events == ["run.started", "run.completed"]
    assert all(line["run_id"] == outcome.run_id for line in lines)
    assert all(line["message"] for line in lines)
    assert lines[1]["duration_ms"] >= 0 and lines[1]["status"] == "succeeded"


def test_catch_up_waits_for_the_current_window_instead_of_being_skipped(tmp_path: Path) -> None:
    release, started = threading.Event(), threading.Event()
    job = hourly("hold", _hold(release, started), overlap="skip")
    made = harness(tmp_path, [job])
    try:
        runner = threading.Thread(target=made.engine.execute, args=(RunRequest("hold", W),))
        runner.start()
        assert started.wait(10)
        older = RunRequest("hold", W - timedelta(hours=3), reason="catch_up")
        outcome = made.engine.execute(older)
        # a scheduled run skips under "skip"; a catch-up run is deferred, not dropped
        plain = made.engine.execute(RunRequest("hold", W + timedelta(hours=1)))
        release.set()
        runner.join(10)
        assert outcome.kind is OutcomeKind.DEFERRED and outcome.settle.value == "retry"
        assert plain.kind is OutcomeKind.SKIPPED
    finally:
        release.set()
        made.close()


def test_in_progress_duplicate_is_retried_after_the_lease_not_acked(tmp_path: Path) -> None:
    release, started = threading.Event(), threading.Event()
    made = harness(tmp_path, [hourly("hold", _hold(release, started))])
    try:
        runner = threading.Thread(target=made.engine.execute, args=(RunRequest("hold", W),))
        runner.start()
        assert started.wait(10)
        outcome = made.engine.execute(RunRequest("hold", W))
        release.set()
        runner.join(10)
        assert outcome.kind is OutcomeKind.IN_PROGRESS
        assert outcome.settle.value == "retry"
        ttl = made.engine.lease_ttl(made.jobs["hold"]).total_seconds()
        assert ttl - 5 < outcome.delay <= ttl + 1
    finally:
        release.set()
        made.close()
