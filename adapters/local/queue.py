"""SQLite implementation of the :class:`~cronwarden.model.ports.Queue` port.

Messages live in one table; a receive marks rows invisible until ``visible_at`` and stamps a
fresh receipt, so a settle from a receiver whose visibility ran out is ignored (another receiver
owns the message now). Dead letters stay in the same table with ``dlq = 1``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cronwarden.model.ports import REDRIVE_ATTRIBUTE, DeadLetter, Delivery, Queue, QueueCapabilities
from cronwarden.model.text import storable

from ._db import BUSY_TIMEOUT_MS, Database

if TYPE_CHECKING:
    from cronwarden.ops.doctor import DeadLetterPolicy

MAX_DELIVERIES_ATTRIBUTE = "cw-max-deliveries"
_POLL_SECONDS = 0.05
_MAX_REASON_BYTES = 200
_MAX_DESCRIPTION_BYTES = 16_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL,
    body BLOB NOT NULL,
    attributes TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    visible_at REAL NOT NULL,
    enqueued_at REAL NOT NULL,
    receipt TEXT,
    dlq INTEGER NOT NULL DEFAULT 0,
    reason TEXT, description TEXT, dead_lettered_at REAL
);
CREATE INDEX IF NOT EXISTS messages_ready ON messages (dlq, visible_at);
CREATE TABLE IF NOT EXISTS dedup (dedup_id TEXT PRIMARY KEY, seen_at REAL NOT NULL)
"""


class SQLiteQueue(Queue):
    """A durable queue in SQLite, safe for many worker processes.

    ``max_deliveries``: deliveries without settlement before the queue dead-letters a message
    itself (reason ``MaxDeliveryCountExceeded``); a message may lower or raise it with the
    ``cw-max-deliveries`` attribute. ``dedup_window``: seconds a ``dedup_id`` is remembered.
    ``busy_timeout``: seconds to wait for another process's write lock (default 5).

    Every operation raises :class:`~cronwarden.model.errors.StoreUnavailable` (nothing applied:
    send it again later) when the file stays locked past the busy timeout (another process
    stopped or stuck inside a write) or cannot be used, in one line naming the file; never a raw
    ``sqlite3.OperationalError``.
    """

    def __init__(
        self,
        path: str,
        *,
        max_deliveries: int = 10,
        dedup_window: float = 600.0,
        busy_timeout: float = BUSY_TIMEOUT_MS / 1000,
    ):
        if max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        self._db = Database(
            path, _SCHEMA, busy_timeout_ms=int(busy_timeout * 1000), where="SQLite queue"
        )
        self.max_deliveries = max_deliveries
        self.dedup_window = dedup_window
        self.capabilities = QueueCapabilities(dedup=True, max_deliveries=max_deliveries)

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        now = time.time()
        with self._db.translated("publish"), self._db.write() as conn:
            if dedup_id is not None:
                conn.execute("DELETE FROM dedup WHERE seen_at < ?", (now - self.dedup_window,))
                inserted = conn.execute(
                    "INSERT OR IGNORE INTO dedup VALUES (?, ?)", (dedup_id, now)
                ).rowcount
                if not inserted:
                    return
            conn.execute(
                "INSERT INTO messages (message_id, body, attributes, visible_at, enqueued_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    dedup_id or secrets.token_hex(8),
                    bytes(body),
                    json.dumps(dict(attributes or {})),
                    now + max(0.0, delay),
                    now,
                ),
            )

    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            found = self._receive_now(max_messages, visibility)
            if found or time.monotonic() >= deadline:
                return found
            time.sleep(min(_POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def _receive_now(self, max_messages: int, visibility: float) -> list[Delivery]:
        now = time.time()
        out: list[Delivery] = []
        with self._db.translated("receive"), self._db.write() as conn:
            rows = conn.execute(
                "SELECT seq, message_id, body, attributes, attempt, enqueued_at FROM messages "
                "WHERE dlq = 0 AND visible_at <= ? ORDER BY visible_at, seq LIMIT ?",
                (now, max_messages),
            ).fetchall()
            for seq, message_id, body, attributes, attempt, enqueued_at in rows:
                attrs = json.loads(attributes)
                limit = int(attrs.get(MAX_DELIVERIES_ATTRIBUTE, self.max_deliveries))
                if attempt >= limit:
                    conn.execute(
                        "UPDATE messages SET dlq = 1, reason = ?, description = ?, "
                        "dead_lettered_at = ?, receipt = NULL WHERE seq = ?",
                        (
                            "MaxDeliveryCountExceeded",
                            f"not settled after {attempt} deliveries",
                            now,
                            seq,
                        ),
                    )
                    continue
                receipt = secrets.token_hex(8)
                conn.execute(
                    "UPDATE messages SET attempt = attempt + 1, visible_at = ?, receipt = ? "
                    "WHERE seq = ?",
                    (now + visibility, receipt, seq),
                )
                out.append(
                    Delivery(
                        message_id=message_id,
                        body=bytes(body),
                        attributes=attrs,
                        attempt=attempt + 1,
                        handle=(seq, receipt),
                        enqueued_at=datetime.fromtimestamp(enqueued_at, UTC),
                    )
                )
        return out

    def _settle(
        self, delivery: Delivery, what: str, sql: str, *args: object, only_live: bool = False
    ) -> bool:
        seq, receipt = delivery.handle
        where = " WHERE seq = ? AND receipt = ?" + (" AND dlq = 0" if only_live else "")
        with self._db.translated(what), self._db.write() as conn:
            return bool(conn.execute(sql + where, (*args, seq, receipt)).rowcount)

    def dead_letter_policy(self) -> DeadLetterPolicy:
        """For ``cronwarden doctor``: the dead-letter table always exists; the limit is this
        queue's ``max_deliveries``."""
        from cronwarden.ops.doctor import DeadLetterPolicy

        return DeadLetterPolicy(True, self.max_deliveries, "the SQLite queue's dead letters")

    def ack(self, delivery: Delivery) -> None:
        self._settle(delivery, "ack", "DELETE FROM messages")

    def retry(self, delivery: Delivery, delay: float) -> None:
        self._settle(
            delivery,
            "retry",
            "UPDATE messages SET visible_at = ?, receipt = NULL",
            time.time() + max(0.0, delay),
        )

    def extend(self, delivery: Delivery, visibility: float) -> None:
        self._settle(
            delivery, "extend", "UPDATE messages SET visible_at = ?", time.time() + visibility
        )

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        """Move the delivery to the dead letters with ``reason`` and ``description`` (made
        storable: a NUL or a lone surrogate in a handler's error must not make this call fail
        and leave the message to come back). A message dead-lettered already keeps its first
        reason: a repeated call changes nothing."""
        self._settle(
            delivery,
            "dead_letter",
            "UPDATE messages SET dlq = 1, reason = ?, description = ?, dead_lettered_at = ?, "
            "receipt = NULL",
            storable(reason, _MAX_REASON_BYTES),
            storable(description, _MAX_DESCRIPTION_BYTES),
            time.time(),
            only_live=True,
        )

    def holds(self, run_key: str) -> bool:
        """Whether a message for ``run_key`` waits in the queue (not dead-lettered): what the
        CLI's manual trigger reads to say "already queued" instead of enqueuing a repeat."""
        with self._db.translated("holds"):
            return self._holds(run_key)

    def _holds(self, run_key: str) -> bool:
        row = (
            self._db.connection()
            .execute(
                "SELECT 1 FROM messages WHERE dlq = 0 AND json_extract(attributes, '$.run_key') = ?"
                " LIMIT 1",
                (run_key,),
            )
            .fetchone()
        )
        return row is not None

    def dlq_depth(self) -> int:
        with self._db.translated("dlq depth"):
            return self._dlq_depth()

    def _dlq_depth(self) -> int:
        (count,) = (
            self._db.connection().execute("SELECT count(*) FROM messages WHERE dlq = 1").fetchone()
        )
        return int(count)

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        with self._db.translated("dlq peek"):
            rows = self._dlq_rows(limit)
        return [
            DeadLetter(
                message_id=r[0],
                body=bytes(r[1]),
                attributes=json.loads(r[2]),
                reason=r[3] or "",
                description=r[4] or "",
                attempts=r[5],
                dead_lettered_at=datetime.fromtimestamp(r[6], UTC) if r[6] else None,
            )
            for r in rows
        ]

    def _dlq_rows(self, limit: int) -> list[Any]:
        return (
            self._db.connection()
            .execute(
                "SELECT message_id, body, attributes, reason, description, attempt, "
                "dead_lettered_at FROM messages WHERE dlq = 1 "
                "ORDER BY dead_lettered_at, seq LIMIT ?",
                (limit,),
            )
            .fetchall()
        )

    def redrive(self, limit: int = 10) -> int:
        if limit < 1:
            raise ValueError("redrive limit must be at least 1")
        now = time.time()
        with self._db.translated("redrive"), self._db.write() as conn:
            rows = conn.execute(
                "SELECT seq, attributes FROM messages WHERE dlq = 1 "
                "ORDER BY dead_lettered_at, seq LIMIT ?",
                (limit,),
            ).fetchall()
            for seq, attributes in rows:
                attrs = json.loads(attributes)
                attrs[REDRIVE_ATTRIBUTE] = str(int(attrs.get(REDRIVE_ATTRIBUTE, "0")) + 1)
                conn.execute(
                    "UPDATE messages SET dlq = 0, attempt = 0, visible_at = ?, receipt = NULL, "
                    "reason = NULL, description = NULL, dead_lettered_at = NULL, attributes = ? "
                    "WHERE seq = ?",
                    (now, json.dumps(attrs), seq),
                )
            return len(rows)

    def dlq_remove(self, message_ids: Sequence[str]) -> int:
        """Delete the dead letters with these message ids (one transaction)."""
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return 0
        with self._db.translated("dlq remove"), self._db.write() as conn:
            removed = 0
            for message_id in ids:
                cursor = conn.execute(
                    "DELETE FROM messages WHERE dlq = 1 AND message_id = ?", (message_id,)
                )
                removed += cursor.rowcount
            return removed

    def close(self) -> None:
        self._db.close()
