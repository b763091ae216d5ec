"""Repeating measurements and summarising them: median and spread, percentiles."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and the relative spread ((max - min) / median) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    median = statistics.median(ordered)
    return {
        "n": len(ordered),
        "median": median,
        "min": ordered[0],
        "max": ordered[-1],
        "spread": (ordered[-1] - ordered[0]) / median if median else 0.0,
        "values": [round(v, 6) for v in ordered],
    }


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ordered sequence (``q`` in 0..100)."""
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, round(q / 100 * len(ordered) + 0.4999))
    return float(ordered[min(len(ordered), rank) - 1])


def latency_summary(samples: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50": percentile(ordered, 50),
        "p95": percentile(ordered, 95),
        "min": ordered[0],
        "max": ordered[-1],
    }


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    """``(seconds, result)`` of one call."""
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def repeat(action: Callable[[], Any], times: int) -> list[float]:
    """Seconds taken by each of ``times`` calls of ``action``."""
    return [timed(action)[0] for _ in range(times)]


def fmt_spread(s: dict[str, Any], scale: float = 1.0, unit: str = "", digits: int = 1) -> str:
    """``median (min-max)`` of a summary, scaled (e.g. 1000 for ms)."""
    if not s.get("n"):
        return "-"
    m, lo, hi = (s[k] * scale for k in ("median", "min", "max"))
    return f"{m:,.{digits}f}{unit} ({lo:,.{digits}f}-{hi:,.{digits}f})"
