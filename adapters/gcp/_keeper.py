"""Keeping Pub/Sub deliveries invisible for longer than the 600 s an ack deadline can reach.

:meth:`PubSubQueue.receive` and :meth:`PubSubQueue.extend` promise invisibility for the
requested time; Pub/Sub caps one ``ModifyAckDeadline`` at 600 s. For a longer request the queue
sets the cap and registers the delivery here; one daemon thread re-extends registered
deliveries every third of the cap (as the high-level client's lease manager does) until they
are settled or their requested time has passed. Nothing runs while nothing is registered.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)

Extend = Callable[[Sequence[str], int], None]  #: (ack ids, seconds) -> ModifyAckDeadline


class DeadlineKeeper:
    """Re-extends ack ids until their target time (monotonic clock) or until forgotten."""

    def __init__(self, extend: Extend, cap: float) -> None:
        self._extend = extend
        self.cap = cap
        self._targets: dict[str, float] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def keep(self, ack_ids: Sequence[str], visibility: float) -> None:
        """Hold ``ack_ids`` invisible for ``visibility`` seconds from now (the caller has just
        set each one's deadline to the cap)."""
        if not ack_ids:
            return
        until = time.monotonic() + visibility
        with self._cond:
            if self._closed:
                return
            for ack_id in ack_ids:
                self._targets[ack_id] = until
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="cw-pubsub-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def forget(self, ack_ids: Sequence[str]) -> None:
        """Stop extending ``ack_ids`` (settled, or given a new deadline within the cap)."""
        with self._cond:
            for ack_id in ack_ids:
                self._targets.pop(ack_id, None)

    def pending(self) -> int:
        with self._cond:
            return len(self._targets)

    def _due(self) -> dict[int, list[str]]:
        now = time.monotonic()
        groups: dict[int, list[str]] = {}
        for ack_id, until in list(self._targets.items()):
            remaining = until - now
            if remaining <= 0:
                del self._targets[ack_id]
                continue
            seconds = max(1, min(int(self.cap), math.ceil(remaining)))
            groups.setdefault(seconds, []).append(ack_id)
        return groups

    def _run(self) -> None:
        interval = self.cap / 3
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or bool(self._targets))
                # Then sleep a third of the cap (woken early only by close()).
                if self._cond.wait_for(lambda: self._closed, timeout=interval):
                    return
                groups = self._due()
            for seconds, ack_ids in groups.items():
                try:
                    self._extend(ack_ids, seconds)
                except Exception as exc:  # keep going; the next round tries again
                    log.warning("could not extend %d Pub/Sub deliveries: %s", len(ack_ids), exc)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._targets.clear()
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
