"""The history checker: judges one trial from its history file and the final state.

Checks (each violation is listed with its evidence):

* **at most once where the ledger promises it**: an item's side effect is repeated only while
  the item is *uncertain* — a repeat must carry the first effect's idempotency key, must not
  start after the item's *done* mark was accepted, and must come from an owner that had claimed
  the item (*pending*) in an accepted commit. A whole-run job (no ledger) may repeat its effect
  only under a later fence and never after the run's success was accepted.
* **at least once / no silent loss**: every scheduled window ends ``succeeded`` with every item's
  effect present, or ``dead_lettered`` *and* visible: in the dead-letter queue and alerted by the
  watcher (``dead_letters`` or ``failing``).
* **never two live owners**: no owner confirms its lease (``ctx.check()`` passes, timed from
  just *before* the check) after a higher fence's claim of the run key was accepted.
* **no stale write accepted**: per run key, no accepted write carrying fence f whose commit
  *started* after a write with a higher fence was *accepted* (sound: wall times from the
  recording store, before and after each commit).
* **secrets canary**: no canary value in any log line, alert, dead-letter reason/description or
  stored error text.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Expect:
    """What a trial scheduled: run keys, and per run key the items (None: a whole-run job)."""

    windows: dict[str, list[str] | None]
    #: run keys allowed to end dead-lettered (a poison job); others must succeed
    may_dead_letter: set[str] = field(default_factory=set)
    #: whether the trial may leave messages in the DLQ (a dead letter raises an alert: one
    #: left by a run that succeeded is a false alarm)
    dead_letters_expected: bool = False


@dataclass
class Verdict:
    effects: int = 0
    duplicates: int = 0  #: repeats the ledger/run record promised would not happen
    redone_uncertain: int = 0  #: allowed repeats of uncertain items (same idempotency key)
    losses: int = 0
    stale_writes: int = 0
    live_owner_overlaps: int = 0
    canary_leaks: int = 0
    commits_accepted: int = 0
    commits_refused: int = 0
    commits_errored: int = 0
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "violations"} | {
            "violations": self.violations[:20]
        }


def load(history: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    conn = sqlite3.connect(history, timeout=60)
    conn.row_factory = sqlite3.Row
    try:
        effects = [dict(r) for r in conn.execute("SELECT * FROM effects ORDER BY at")]
        commits = [dict(r) for r in conn.execute("SELECT * FROM commits ORDER BY seq")]
    finally:
        conn.close()
    return effects, commits


def check(
    history: str,
    expect: Expect,
    *,
    final_runs: dict[str, dict[str, Any]],
    dead_lettered: Iterable[str] = (),
    alerted_jobs: Iterable[str] = (),
    texts: Iterable[str] = (),
    canaries: Iterable[str] = (),
    dlq_depth: int = 0,
) -> Verdict:
    """Judge a trial. ``final_runs``: run key → final run record data; ``dead_lettered``: run
    keys found in the DLQ; ``alerted_jobs``: jobs the watcher alerted ``failing`` (``"*"`` for
    the queue-wide ``dead_letters`` alert);
    ``texts``: every log line, alert and dead-letter text the trial produced."""
    effects, commits = load(history)
    v = Verdict(effects=len(effects))
    accepted = [c for c in commits if c["status"] == "accepted"]
    v.commits_accepted = len(accepted)
    v.commits_refused = sum(c["status"] == "conflict" for c in commits)
    v.commits_errored = sum(c["status"] == "error" for c in commits)

    # Per run key: when each fence's first write was accepted (the claim / takeover).
    claim_after: dict[str, dict[int, float]] = defaultdict(dict)
    success_after: dict[str, float] = {}
    done_after: dict[tuple[str, str], float] = {}
    pending_by: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for c in accepted:
        key, fence = c["run_key"], c["fence"]
        if key is None or fence is None:
            continue
        claim_after[key].setdefault(fence, c["t_after"])
        if c["state"] == "succeeded":
            success_after.setdefault(key, c["t_after"])
        for run_key, item, state in json.loads(c["items"] or "[]"):
            if state == "done":
                done_after.setdefault((run_key, item), c["t_after"])
            elif state == "pending":
                pending_by[(run_key, item)].setdefault(fence, c["t_after"])

    # -- stale writes: a write with fence f that started after a higher fence was accepted --
    for c in accepted:
        key, fence = c["run_key"], c["fence"]
        if key is None or fence is None:
            continue
        higher = [t for f, t in claim_after[key].items() if f > fence]
        if higher and c["t_before"] > min(higher):
            v.stale_writes += 1
            v.violations.append(
                f"stale write accepted: {key} fence {fence} by pid {c['pid']} started "
                f"{c['t_before'] - min(higher):.3f}s after a higher fence was accepted"
            )

    # -- two live owners: an owner confirmed its lease after a higher fence took over ---------
    for e in effects:
        key, fence = e["run_key"], e["fence"]
        higher = [t for f, t in claim_after.get(key, {}).items() if f > fence]
        if higher and e["checked_at"] is not None and e["checked_at"] > min(higher):
            v.live_owner_overlaps += 1
            v.violations.append(
                f"two live owners: {key} fence {fence} (pid {e['pid']}) confirmed its lease "
                f"{e['checked_at'] - min(higher):.3f}s after fence {fence + 1} was accepted "
                f"and acted on item {e['item']}"
            )

    # -- at most once --------------------------------------------------------------------------
    by_item: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in effects:
        if e["kind"] in ("item", "run"):
            by_item[(e["run_key"], e["item"])].append(e)
    for (key, item), seen in by_item.items():
        ledger_item = expect.windows.get(key) is not None
        first = seen[0]
        for e in seen[1:]:
            why = ""
            if e["idem"] != first["idem"]:
                why = "a different idempotency key"
            elif ledger_item:
                done = done_after.get((key, item))
                claims = pending_by.get((key, item), {})
                if done is not None and e["checked_at"] > done:
                    why = f"started {e['checked_at'] - done:.3f}s after the item was marked done"
                elif e["fence"] not in claims:
                    why = f"fence {e['fence']} never claimed the item"
                elif e["fence"] == first["fence"] and e["run_id"] == first["run_id"]:
                    why = "the same owner did it twice"
            else:
                ok_at = success_after.get(key)
                if ok_at is not None and e["checked_at"] > ok_at:
                    why = "after the run's success was recorded"
                elif e["fence"] <= first["fence"]:
                    why = "under the same fence"
            if why:
                v.duplicates += 1
                v.violations.append(f"duplicate effect: {key} item {item}: {why}")
            else:
                v.redone_uncertain += 1

    # -- at least once / no silent loss -------------------------------------------------------
    dead = set(dead_lettered)
    alerted = set(alerted_jobs)
    for key, items in expect.windows.items():
        run = final_runs.get(key) or {}
        state = run.get("state")
        if state == "succeeded":
            wanted = items if items is not None else ["run"]
            missing = [i for i in wanted if (key, i) not in by_item]
            if missing:
                v.losses += len(missing)
                v.violations.append(f"lost: {key} succeeded without items {missing[:5]}")
        elif state == "dead_lettered":
            job = key.split(":", 1)[0]
            if key not in expect.may_dead_letter:
                v.losses += 1
                v.violations.append(f"lost: {key} dead-lettered unexpectedly")
            elif key not in dead or not ({job, "*"} & alerted):
                v.losses += 1
                v.violations.append(
                    f"silent loss: {key} dead-lettered but "
                    f"{'not in the DLQ' if key not in dead else 'not alerted'}"
                )
        else:
            v.losses += 1
            v.violations.append(f"lost: {key} ended {state or 'with no run record'}")

    if dlq_depth and not expect.dead_letters_expected:
        v.violations.append(f"{dlq_depth} spurious dead letter(s): a false dead_letters alert")

    # -- secrets canary -----------------------------------------------------------------------
    secrets = [c for c in canaries if c]
    for text in texts:
        for secret in secrets:
            if secret in text:
                v.canary_leaks += 1
                at = text.index(secret)
                shown = text[max(0, at - 80) : at].replace("\n", " ")
                v.violations.append(f"secret leaked after: …{shown}<CANARY>")
    return v
