"""Buffered acks for :class:`~cronwarden.adapters.postgres.queue.PostgresQueue`.

An ack is a delete naming the delivery's receipt. Sent on its own it is one round trip per
run; buffered, it rides along with the next receive's statement (the usual case: a worker
acks, then receives again) or, when no receive follows, a flusher thread sends the buffer in
one statement at most ``bound`` seconds after its oldest ack, and :meth:`AckBuffer.close`
sends what is left. The bound is far inside any visibility timeout, so a buffered ack never
lets its message reappear on a live host. A crash before the send loses only acks of
finished runs: those messages are delivered again and the store's claim refuses them as
duplicates (at-least-once is unchanged; nothing runs twice).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cronwarden.model.redaction import redact

log = logging.getLogger("cronwarden.postgres")
#: seconds between flush attempts after a failed flush (the database is down)
RETRY_PAUSE = 1.0


@dataclass(frozen=True)
class PendingAck:
    """One buffered ack: the delivery's row, its receipt, and its id (for the logs)."""

    seq: int
    receipt: Any
    message_id: str


class AckBuffer:
    """Thread-safe buffer of :class:`PendingAck`; ``send(acks)`` deletes them in one statement
    (called by the flusher thread, and by :meth:`close`). Receivers call :meth:`take` and
    send what they took themselves; they :meth:`put_back` what they could not send."""

    def __init__(self, bound: float, send: Callable[[list[PendingAck]], None]) -> None:
        self.bound = bound
        self._send = send
        self._cond = threading.Condition()
        self._pending: list[PendingAck] = []
        self._oldest = 0.0
        self._stopping = False
        self._thread: threading.Thread | None = None

    def add(self, ack: PendingAck) -> bool:
        """Buffer ``ack``; False (nothing buffered) once closed: the caller sends it itself."""
        with self._cond:
            if self._stopping:
                return False
            first = not self._pending
            self._pending.append(ack)
            if first:  # else the flusher already waits for the oldest one's deadline
                self._oldest = time.monotonic()
                self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="cronwarden-pg-acks", daemon=True
                )
                self._thread.start()
            return True

    def take(self) -> list[PendingAck]:
        """Everything buffered, removed from the buffer (the caller now owns sending it)."""
        with self._cond:
            taken, self._pending = self._pending, []
            return taken

    def put_back(self, acks: list[PendingAck]) -> None:
        """Acks a caller took but could not send: buffered again, due at once."""
        if not acks:
            return
        with self._cond:
            self._oldest = time.monotonic() - self.bound  # older than anything buffered
            self._pending = acks + self._pending
            self._cond.notify_all()

    def flush(self) -> None:
        """Send everything buffered now (raises what ``send`` raises; the acks stay buffered)."""
        acks = self.take()
        if not acks:
            return
        try:
            self._send(acks)
        except BaseException:
            self.put_back(acks)
            raise

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                due = self._oldest + self.bound - time.monotonic()
                if due > 0:
                    self._cond.wait(due)
                    continue  # taken by a receive meanwhile, or due now
            try:
                self.flush()
            except Exception as exc:
                log.warning(
                    "sending buffered acks failed (%s: %s); retrying in %ss",
                    type(exc).__name__,
                    redact(str(exc)),
                    RETRY_PAUSE,
                    extra={"event": "queue.ack_flush_failed"},
                )
                with self._cond:
                    self._cond.wait_for(lambda: self._stopping, RETRY_PAUSE)

    def close(self) -> None:
        """Stop the flusher, then send what is left (raises if that fails). Idempotent."""
        with self._cond:
            self._stopping = True
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout=10)
        self.flush()
