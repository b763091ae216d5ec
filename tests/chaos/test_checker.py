"""The checker itself, on hand-made histories: each violation it exists for is caught, and a
clean history passes. Fast: part of the normal test run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .checker import Expect, check
from .history import connect

pytestmark = pytest.mark.chaos
KEY = "job:2026-01-20T02:00Z"


class History:
    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.conn = connect(self.path)

    def commit(
        self,
        t0: float,
        t1: float,
        fence: int,
        state: str = "running",
        items: list[tuple[str, str]] = (),  # type: ignore[assignment]
        status: str = "accepted",
        lease: float = 1e12,
    ) -> None:
        self.conn.execute(
            "INSERT INTO commits (pid, status, t_before, t_after, skew, ops, run_key, fence, "
            "owner, state, lease_expires, items, error, started_at) "
            "VALUES (1, ?, ?, ?, 0, '[]', ?, ?, ?, ?, ?, ?, NULL, NULL)",
            (
                status,
                t0,
                t1,
                KEY,
                fence,
                f"o{fence}",
                state,
                lease,
                json.dumps([[KEY, i, s] for i, s in items]),
            ),
        )

    def effect(
        self, at: float, item: str, fence: int, *, idem: str = "", uncertain: bool = False
    ) -> None:
        self.conn.execute(
            "INSERT INTO effects VALUES (?, ?, ?, ?, ?, 1, ?, ?, 'item', ?)",
            (KEY, item, idem or f"idem-{item}", f"run{fence}", fence, at, int(uncertain), at),
        )


def clean(h: History) -> None:
    h.commit(0.0, 0.1, 1, items=[("a", "pending"), ("b", "pending")])
    h.effect(0.2, "a", 1)
    h.effect(0.3, "b", 1)  # owner 1 dies before marking b done
    h.commit(0.25, 0.26, 1, items=[("a", "done")])
    h.commit(5.0, 5.1, 2, items=[("b", "pending")])  # takeover
    h.effect(5.2, "b", 2, uncertain=True)  # the uncertain item is redone, same key
    h.commit(5.3, 5.4, 2, state="succeeded", items=[("b", "done")])


def verdict(h: History, **kw: object):  # type: ignore[no-untyped-def]
    return check(
        h.path,
        Expect({KEY: ["a", "b"]}),
        final_runs={KEY: {"state": "succeeded"}},
        **kw,  # type: ignore[arg-type]
    )


def test_a_clean_history_passes(tmp_path: Path) -> None:
    h = History(tmp_path / "h.db")
    clean(h)
    v = verdict(h)
    assert v.ok, v.violations
    assert v.redone_uncertain == 1 and v.duplicates == 0


def test_a_done_item_redone_is_a_duplicate(tmp_path: Path) -> None:
    h = History(tmp_path / "h.db")
    clean(h)
    h.commit(5.15, 5.16, 2, items=[("a", "pending")])
    h.effect(5.5, "a", 2, uncertain=True)
    v = verdict(h)
    assert v.duplicates == 1 and "marked done" in v.violations[0]


def test_a_repeat_with_another_idempotency_key_is_a_duplicate(tmp_path: Path) -> None:
    h = History(tmp_path / "h.db")
    clean(h)
    h.effect(5.25, "b", 2, idem="other", uncertain=True)
    assert verdict(h).duplicates == 1


def test_a_stale_write_is_caught_and_an_overlapping_one_is_not(tmp_path: Path) -> None:
    h = History(tmp_path / "h.db")
    clean(h)
    h.commit(5.05, 5.5, 1)  # started before the takeover was accepted: not provably stale
    assert verdict(h).stale_writes == 0
    h.commit(5.2, 5.3, 1)  # started after fence 2 was accepted
    v = verdict(h)
    assert v.stale_writes == 1 and "stale write" in v.violations[0]


def test_an_owner_acting_after_a_takeover_is_two_live_owners(tmp_path: Path) -> None:
    h = History(tmp_path / "h.db")
    clean(h)
    h.effect(5.3, "b", 1)
    v = verdict(h)
    assert v.live_owner_overlaps == 1


def test_silent_loss_and_missing_items(tmp_path: Path) -> None:
    h = History(tmp_path / "h.db")
    h.commit(0.0, 0.1, 1, items=[("a", "pending")])
    h.effect(0.2, "a", 1)
    h.commit(0.3, 0.4, 1, state="succeeded", items=[("a", "done")])
    v = verdict(h)
    assert v.losses == 1  # item b never happened
    dead = check(
        h.path,
        Expect({KEY: ["a"]}, may_dead_letter={KEY}),
        final_runs={KEY: {"state": "dead_lettered"}},
        dead_lettered=[KEY],
        alerted_jobs=[],
    )
    assert dead.losses == 1 and "not alerted" in dead.violations[0]
    seen = check(
        h.path,
        Expect({KEY: ["a"]}, may_dead_letter={KEY}),
        final_runs={KEY: {"state": "dead_lettered"}},
        dead_lettered=[KEY],
        alerted_jobs=["*"],
    )
    assert seen.ok


def test_secret_canary(tmp_path: Path) -> None:
    h = History(tmp_path / "h.db")
    clean(h)
    v = verdict(h, texts=["fine", "oops AccountKey=s3cr3t-canary;"], canaries=["s3cr3t-canary"])
    assert v.canary_leaks == 1 and "s3cr3t-canary" not in v.violations[0]
