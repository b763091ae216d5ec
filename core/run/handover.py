"""Handing a job's lock from one run to the next in one commit: the completion of a run and the
claim of the next window of the same job, when a worker already holds that window's delivery.

A worker that took a batch of deliveries runs them one after the other. Done one by one, each
run costs two commits: its claim (run record + lock + status "running") and its completion (run
record + lock released + status). When the next delivery is a plain scheduled window of the
same job, the completion can claim it in the same commit: the lock is not deleted and created
again but rewritten for the next run (:class:`~cronwarden.model.ports.Update`, fenced by this
run's lock version), the next run record is created, and the two status merges are one
(:func:`compose`). One commit per run instead of two.

The commit is all or nothing, so nothing changes in what either half promises:

* refused (the next window's run record exists: a duplicate, a retry; this run's records
  were taken over or rewritten by a pause) or not applied: nothing of it landed, and the
  completion is made alone as before (:meth:`~cronwarden.run.lease.Lease.finish`), the next
  delivery is claimed as usual;
* of unknown outcome: this run's record is read back; our write id on it means the whole
  commit landed; otherwise the completion is made alone as before.

The handed claim is the next ``Engine.execute`` of that window's request on the same thread
(the worker executes its next delivery next). A claim that is never executed (the worker
stopped between the two) is what a worker killed right after a claim leaves: the lease runs out
and the delivery, delivered again, takes the run over.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.ports import Key, Merge
from ..model.records import LockRecord, RunRecord
from ..model.runs import RunRequest


@dataclass(frozen=True)
class Handover:
    """The claim of ``request`` (the next window of the same job), ready to ride in the
    completion of the run that holds the lock: its run record (created), the lock as it will
    read (rewritten from this run's), and its status merge (composed with the completion's)."""

    request: RunRequest
    run_key: Key
    run: RunRecord
    lock: LockRecord
    status: Merge


def compose(first: Merge, then: Merge) -> Merge | None:
    """One Merge that leaves what ``first`` then ``then`` leave, on any record; ``None`` when
    no single Merge can (a field one sets and the other counts, or counted one way and raised
    the other). A Merge names each field once, so per field:

    * set by ``then``: ``then``'s value, whatever ``first`` did;
    * counted by both: the sum; raised by both: the larger maximum;
    * touched by one only: as that one does.
    """
    if first.key != then.key:
        return None
    fields = {k: v for k, v in first.fields.items() if k not in then.fields}
    increments = {k: v for k, v in first.increments.items() if k not in then.fields}
    maximums = {k: v for k, v in first.maximums.items() if k not in then.fields}
    fields.update(then.fields)
    for name, amount in then.increments.items():
        if name in fields or name in maximums:
            return None
        increments[name] = increments.get(name, 0) + amount
    for name, floor in then.maximums.items():
        if name in fields or name in increments:
            return None
        maximums[name] = max(maximums.get(name, floor), floor)
    # a sum of 0 stays: on a missing or null field it still leaves 0, as the two would
    return Merge(then.key, fields, increments, maximums)


__all__ = ["Handover", "compose"]
