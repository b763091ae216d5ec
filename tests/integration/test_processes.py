"""The protocol across real OS processes sharing one SQLite store: races, overlap, SIGKILL,
SIGSTOP. Side effects are recorded where the test reads them (tests/support/jobs.py)."""

from __future__ import annotations

import signal
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronwarden.adapters.local import SQLiteStore
from cronwarden.model.ports import RUN, STATUS, Key
from cronwarden.model.records import parse_iso
from cronwarden.run.ledger import item_records
from tests.support.procs import effects, poll, reaping, start_worker

pytestmark = pytest.mark.slow
WINDOW = "2026-01-20T02:00Z"


def read(db: Path, kind: str, job: str, id_: str = "") -> dict:  # type: ignore[type-arg]
    store = SQLiteStore(str(db))
    try:
        record = store.get(Key(kind, job, id_))
        return record.data if record else {}
    finally:
        store.close()


def test_processes_racing_on_one_run_key_run_it_once(tmp_path: Path) -> None:
    db, fx, go = tmp_path / "state.db", tmp_path / "fx.db", tmp_path / "go"
    n = 6
    with reaping([start_worker(db, fx, "race", WINDOW, go_file=go) for _ in range(n)]) as procs:
        go.touch()
        results = [p.result() for p in procs]
    kinds = Counter(r["kind"] for r in results)
    assert kinds["succeeded"] == 1, results
    assert kinds["in_progress"] + kinds["duplicate"] == n - 1, results
    assert len(effects(fx, "race")) == 1
    status = read(db, STATUS, "race")
    assert status["duplicates"] == n - 1  # every loser recorded its skip
    assert status["last_skip_reason"] in ("in_progress", "duplicate")
    loser_logs = [log for p in procs for log in p.logs() if log.get("event") == "run.skipped"]
    assert len(loser_logs) == n - 1
    assert all(log["reason"] in ("in_progress", "duplicate") for log in loser_logs)


def test_forced_overlap_skips_with_lock_holder_named(tmp_path: Path) -> None:
    db, fx, release = tmp_path / "state.db", tmp_path / "fx.db", tmp_path / "release"
    env = {"CW_TEST_RELEASE": str(release)}
    with reaping([start_worker(db, fx, "slow", WINDOW, env=env)]) as procs:
        poll(lambda: effects(fx, "slow-start"), what="first run started")
        second = start_worker(db, fx, "slow", "2026-01-20T02:01Z", env=env)
        procs.append(second)
        skipped = second.result()
        release.touch()
        first = procs[0].result()
    assert first["kind"] == "succeeded"
    assert skipped["kind"] == "skipped" and skipped["reason"] == "lock_held"
    holder_pid = str(procs[0].popen.pid)
    assert holder_pid in skipped["detail"]
    (line,) = [log for log in second.logs() if log.get("event") == "run.skipped"]
    assert line["reason"] == "lock_held"
    assert holder_pid in line["lock_owner"] and "lock held by" in line["message"]
    assert len(effects(fx, "slow-start")) == 1  # the second never ran the handler
    assert read(db, STATUS, "slow")["skips_since_success"] == 0  # reset by the later success
    # [windows] the skipped scheduled fire is recorded against its window as excused
    excused = read(db, RUN, "slow", "2026-01-20T02:01Z")
    assert excused["state"] == "excused" and excused["excused"] == "overlap_skip"


def _lease_expired(db: Path, job: str) -> bool:
    run = read(db, RUN, job, WINDOW)
    expires = parse_iso(run.get("lease_expires"))
    return expires is not None and expires < datetime.now(UTC)


def test_sigkill_mid_ledger_resumes_from_checkpoint_items_once(tmp_path: Path) -> None:
    db, fx = tmp_path / "state.db", tmp_path / "fx.db"
    env = {
        "CW_TEST_ITEMS": "30",
        "CW_TEST_BATCH": "5",
        "CW_TEST_ITEM_DELAY": "0.05",
        "CW_TEST_RUNTIME": "4s",
    }
    with reaping([start_worker(db, fx, "fanout", WINDOW, env=env, lease_margin=0.3)]) as procs:
        poll(lambda: len(effects(fx, "item")) >= 12, what="12 items processed")
        procs[0].signal(signal.SIGKILL)
        procs[0].popen.wait(timeout=10)
        killed_after = len(effects(fx, "item"))
        poll(lambda: _lease_expired(db, "fanout"), what="lease expiry")
        second = start_worker(db, fx, "fanout", WINDOW, env=env, lease_margin=0.3)
        procs.append(second)
        result = second.result()
    assert result["kind"] == "succeeded", result
    run = read(db, RUN, "fanout", WINDOW)
    assert run["state"] == "succeeded" and run["fence"] == 2 and run["attempt"] == 2
    assert len(effects(fx, "prepare")) == 1  # the checkpoint carried over
    items = effects(fx, "item")
    per_item = Counter(e["item"] for e in items)
    assert sorted(per_item, key=int) == [str(i) for i in range(30)]  # nothing lost
    redone = {k for k, n in per_item.items() if n > 1}
    # Only the batch that was pending at the kill is uncertain and redone; at most one batch.
    assert len(redone) <= 5
    assert all(
        e["uncertain"] for e in items if e["item"] in redone and e["run_id"] == result["run_id"]
    )
    first_run_items = {e["item"] for e in items if e["run_id"] != result["run_id"]}
    assert len(first_run_items) >= 12 and killed_after >= 12
    second_run_items = {e["item"] for e in items if e["run_id"] == result["run_id"]}
    assert first_run_items - redone == first_run_items - second_run_items  # done ones skipped
    # The idempotency key is the same on both attempts: downstream dedup makes it exactly once.
    idems = {}
    for e in items:
        assert idems.setdefault(e["item"], e["idem"]) == e["idem"]
    assert len(set(idems.values())) == 30
    store = SQLiteStore(str(db))
    try:
        ledger = item_records(store, "fanout", WINDOW)
    finally:
        store.close()
    assert len(ledger) == 30 and all(r.data["state"] == "done" for r in ledger)


def test_sigstopped_owner_is_fenced_after_takeover(tmp_path: Path) -> None:
    db, fx = tmp_path / "state.db", tmp_path / "fx.db"
    env = {
        "CW_TEST_ITEMS": "40",
        "CW_TEST_BATCH": "5",
        "CW_TEST_ITEM_DELAY": "0.05",
        "CW_TEST_RUNTIME": "4s",
    }
    with reaping([start_worker(db, fx, "fanout", WINDOW, env=env, lease_margin=0.3)]) as procs:
        first = procs[0]
        poll(lambda: len(effects(fx, "item")) >= 8, what="8 items processed")
        first.signal(signal.SIGSTOP)
        paused_at = datetime.now(UTC).timestamp()
        poll(lambda: _lease_expired(db, "fanout"), what="lease expiry")
        second = start_worker(db, fx, "fanout", WINDOW, env=env, lease_margin=0.3)
        procs.append(second)
        taken = second.result()
        assert taken["kind"] == "succeeded", taken
        after_takeover = read(db, RUN, "fanout", WINDOW)
        continued_at = datetime.now(UTC).timestamp()
        first.signal(signal.SIGCONT)
        stale = first.result()
    assert stale["kind"] == "lease_lost", stale
    # Nothing the stale owner attempted after SIGCONT was accepted by the store...
    assert read(db, RUN, "fanout", WINDOW) == after_takeover
    assert after_takeover["run_id"] == taken["run_id"] and after_takeover["fence"] == 2
    # ...and it started no further side effect: it noticed its lease had run out.
    stale_effects = [e for e in effects(fx, "item") if e["run_id"] == stale["run_id"]]
    assert stale_effects and all(e["at"] < paused_at + 0.5 for e in stale_effects)
    assert not [e for e in stale_effects if e["at"] >= continued_at]
    lost = [log for log in first.logs() if log.get("event") == "lease.lost"]
    assert lost, "the stale owner must log that it lost the lease"
