"""A job's duration baseline: p50 / p95 over its recent successes, kept in its status record
by the completion commit it already makes, blind (no read, no increment) on every store.

The record holds ``BASELINE_RUNS`` slots, plain top-level fields ``dur_slot_00`` … each
``"<window_ts>:<duration_ms>"``. A success writes only the slot of its window:
``(window_ts // interval) mod BASELINE_RUNS``, where ``interval`` is the schedule's interval at
that window, so consecutive windows of a regular schedule fill consecutive slots and the ring
holds the last ``BASELINE_RUNS`` windows; a retry of the same window overwrites its own slot.
Because the write is a plain field set by the lease-holding completion (the same commit that
releases the lock), it needs neither an atomic increment nor a read: one commit, on every
store. Readers keep only slots whose window lies within ``BASELINE_RUNS`` intervals of the
newest one, so samples of windows that never succeeded again age out instead of lingering.

Irregular schedules (``0 9 * * 1-5``) may map two recent windows to one slot; that loses a
sample, never invents one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..jobs.definitions import Job

BASELINE_RUNS = 20  #: successes the digest covers
MIN_SAMPLES = 5  #: fewer than this: no baseline (and no ``slow`` alert) yet
SLOT_PREFIX = "dur_slot_"


def slot_field(index: int) -> str:
    return f"{SLOT_PREFIX}{index:02d}"


def _interval_seconds(job: Job, window: datetime) -> int:
    return max(1, int(job.schedule.interval_at(window).total_seconds()))


def slot_for(job: Job, window: datetime) -> int:
    """The ring slot of ``window``."""
    return (int(window.timestamp()) // _interval_seconds(job, window)) % BASELINE_RUNS


def baseline_fields(
    job: Job, window: datetime, duration_ms: int, now: datetime | None = None
) -> dict[str, Any]:
    """The status fields a success of ``window`` that took ``duration_ms`` writes: none for a
    window older than ``BASELINE_RUNS`` intervals before ``now`` (a backfill must not
    overwrite the slots of recent windows with samples readers would discard as stale)."""
    if now is not None:
        span = BASELINE_RUNS * _interval_seconds(job, window)
        if window.timestamp() <= now.timestamp() - span:
            return {}
    return {slot_field(slot_for(job, window)): f"{int(window.timestamp())}:{int(duration_ms)}"}


@dataclass(frozen=True)
class Sample:
    window_ts: int
    duration_ms: int


def samples(
    job: Job, status: Mapping[str, Any], *, exclude_window: int | None = None
) -> list[Sample]:
    """The recent successes the ring holds (``exclude_window``: leave that window out, e.g.
    the run being judged against the baseline)."""
    found: list[Sample] = []
    for name, value in status.items():
        if not name.startswith(SLOT_PREFIX) or not isinstance(value, str):
            continue
        ts, _, ms = value.partition(":")
        if ts.isdigit() and ms.isdigit():
            found.append(Sample(int(ts), int(ms)))
    if not found:
        return []
    newest = max(s.window_ts for s in found)
    span = BASELINE_RUNS * _interval_seconds(job, datetime.fromtimestamp(newest, UTC))
    return [s for s in found if newest - s.window_ts < span and s.window_ts != exclude_window]


def quantile(values: Sequence[int], q: float) -> float:
    """Linear interpolation between closest ranks (``values`` non-empty)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Baseline:
    """p50 / p95 of a job's recent successful durations."""

    p50_ms: float
    p95_ms: float
    samples: int

    @property
    def p50(self) -> timedelta:
        return timedelta(milliseconds=self.p50_ms)

    @property
    def p95(self) -> timedelta:
        return timedelta(milliseconds=self.p95_ms)

    def describe(self) -> str:
        return f"p50 {_ms(self.p50_ms)} / p95 {_ms(self.p95_ms)} over {self.samples} runs"


def _ms(value: float) -> str:
    if value < 10_000:
        return f"{value:.0f} ms"
    from ..model.durations import format_duration

    return format_duration(timedelta(milliseconds=value))


def baseline_of(
    job: Job, status: Mapping[str, Any], *, exclude_window: int | None = None
) -> Baseline | None:
    """The job's baseline, or None with fewer than ``MIN_SAMPLES`` recent successes."""
    durations = [s.duration_ms for s in samples(job, status, exclude_window=exclude_window)]
    if len(durations) < MIN_SAMPLES:
        return None
    return Baseline(quantile(durations, 0.5), quantile(durations, 0.95), len(durations))


__all__ = [
    "BASELINE_RUNS",
    "MIN_SAMPLES",
    "Baseline",
    "Sample",
    "baseline_fields",
    "baseline_of",
    "quantile",
    "samples",
    "slot_for",
]
