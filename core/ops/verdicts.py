"""How the runs an operator waited for become an exit status and one line.

The contract every command keeps (and the dashboard's actions report the same way):

* ``0``: every run waited for succeeded (or was a duplicate / excused);
* ``1``: one failed, was dead-lettered or is still retrying (the line says which);
* ``2``: bad input.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

GOOD = {"succeeded", "duplicate", "skipped"}
PENDING = {
    "failed": "is still retrying",
    "in_progress": "is still running elsewhere",
    "abandoned": "lost its worker (its lease ran out; it resumes when its message comes back)",
}


def verdict_line(results: Mapping[str, str]) -> tuple[int, str]:
    """``results``: run key → the last outcome kind seen (or a run state). Returns the exit
    status and the line that explains it."""
    if not results:
        return EXIT_OK, "no runs to wait for"
    bad = {key: kind for key, kind in results.items() if kind not in GOOD}
    if not bad:
        kinds = Counter(results.values())
        if set(kinds) == {"succeeded"}:
            return EXIT_OK, f"ok: {len(results)} run(s) succeeded"
        # say what did not run: a skipped window (overlap policy, a pause) is no success
        told = ", ".join(
            f"{kinds[k]} {k}" for k in ("succeeded", "skipped", "duplicate") if kinds[k]
        )
        return EXIT_OK, f"ok: {len(results)} run(s): {told}"
    parts = []
    for kind in sorted(set(bad.values())):
        keys = sorted(k for k, v in bad.items() if v == kind)
        shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        parts.append(f"{len(keys)} {PENDING.get(kind, kind.replace('_', ' '))} ({shown})")
    return EXIT_FAILED, f"not ok: {'; '.join(parts)} of {len(results)} run(s)"
