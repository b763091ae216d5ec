"""PostgreSQL implementation of the :class:`~cronwarden.model.ports.Queue` port.

* ``<schema>.messages``: one row per message; a receive (one plain statement, no function)
  takes visible rows with ``FOR UPDATE SKIP LOCKED``, makes them invisible until the visibility
  deadline, counts the attempt and stamps a fresh receipt. A settle names the receipt, so one
  from a receiver whose visibility ran out changes nothing (another receiver owns it now).
* Unsettled ``max_deliveries`` times (or the message's ``cw-max-deliveries`` attribute), a
  message moves to ``<schema>.dead_letters`` with reason ``MaxDeliveryCountExceeded``;
  ``dead_letter(reason, description)`` moves it there with the worker's reason.
* ``publish(dedup_id=…)`` enqueues nothing when the id was seen within ``dedup_window``
  (``<schema>.dedup``, one statement with the insert); old ids are swept in bounded batches.
* ``publish_many`` (the trigger's catch-up and backfill batches) enqueues a whole batch in one
  statement, all or nothing, with the same de-duplication and one ``NOTIFY``.
* Every publish, retry and redrive sends ``NOTIFY`` on the schema's channel in the same
  statement; a receiver waiting in ``receive(wait=…)`` sleeps on a condition that a listener
  thread (one ``LISTEN`` connection per queue object) signals, so an idle worker wakes at once
  instead of polling. While the listener is reconnecting, waiting receivers poll every
  :data:`FALLBACK_POLL` seconds; a delayed message wakes them when it becomes visible.
* An ``ack`` is buffered (:mod:`.acks`): it is sent inside the next receive's statement (a
  worker acks, then receives: no round trip of its own), or within ``ack_flush`` seconds by a
  flusher thread, or on :meth:`~PostgresQueue.close` / :meth:`~PostgresQueue.flush_acks`;
  :meth:`~PostgresQueue.depth` sends it first. ``ack_flush=0`` sends each ack at once.
* Times are the database server's clock (``clock_timestamp()``): hosts' clocks do not matter.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cronwarden.model.ports import (
    REDRIVE_ATTRIBUTE,
    DeadLetter,
    Delivery,
    Outgoing,
    Queue,
    QueueCapabilities,
)
from cronwarden.model.redaction import redact

from .acks import AckBuffer, PendingAck
from .database import Database
from .schema import notify_channel, quoted
from .settings import PostgresSettings

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("cronwarden.postgres")
MAX_DELIVERIES_ATTRIBUTE = "cw-max-deliveries"
FALLBACK_POLL = 0.5  #: seconds between polls while LISTEN is down
SAFETY_POLL = 5.0  #: longest sleep even with LISTEN up (a lost notification costs this much)
LISTEN_READY_TIMEOUT = 5.0
#: default longest wait of a buffered ack when no receive follows (seconds; far inside any
#: visibility timeout, which is the lease's TTL for a worker)
ACK_FLUSH = 0.2


class PostgresQueue(Queue):
    """A durable queue in PostgreSQL, shared by any number of workers on any number of hosts.

    ``settings``: a :class:`PostgresSettings` or a DSN; ``max_deliveries`` / ``dedup_window``
    override the settings' values. ``database``: share the provider's pool (not closed here).
    ``ack_flush``: longest wait (seconds) of a buffered ack when no receive follows; 0 sends
    every ack on its own, at once.
    """

    deduplicates = True

    def __init__(
        self,
        settings: PostgresSettings | str,
        *,
        database: Database | None = None,
        max_deliveries: int | None = None,
        dedup_window: float | None = None,
        ack_flush: float = ACK_FLUSH,
    ) -> None:
        if isinstance(settings, str):
            settings = PostgresSettings(dsn=settings)
        self.settings = settings
        self.max_deliveries = max_deliveries or settings.max_deliveries
        if self.max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        self.dedup_window = dedup_window or settings.dedup_window
        if ack_flush < 0:
            raise ValueError("ack_flush must be at least 0")
        self.ack_flush = float(ack_flush)
        self._acks = AckBuffer(self.ack_flush, self._send_acks)
        self.capabilities = QueueCapabilities(
            dedup=True, max_deliveries=self.max_deliveries, max_delay=None
        )
        self._owns_db = database is None
        self.db = database or Database(settings, name="cronwarden-queue")
        self.channel = notify_channel(settings.schema)
        self._wakeups: _Wakeups | None = None
        self._wake_guard = threading.Lock()
        q = quoted(settings.schema)
        self._q = q
        notify = "SELECT pg_notify(%(channel)s, '') FROM ins"
        insert = (
            f"INSERT INTO {q}.messages (message_id, body, attributes, visible_at, enqueued_at) "
            "SELECT %(mid)s, %(body)s, %(attrs)s::jsonb, "
            "clock_timestamp() + %(delay)s * interval '1 second', clock_timestamp()"
        )
        self._sql_publish = f"WITH ins AS ({insert} RETURNING seq) {notify}"
        self._sql_publish_dedup = (
            f"WITH fresh AS (INSERT INTO {q}.dedup AS d (dedup_id, seen_at) "
            "VALUES (%(mid)s, clock_timestamp()) ON CONFLICT (dedup_id) DO UPDATE "
            "SET seen_at = EXCLUDED.seen_at "
            "WHERE d.seen_at < clock_timestamp() - %(window)s * interval '1 second' "
            f"RETURNING 1), ins AS ({insert} FROM fresh RETURNING seq) {notify}"
        )
        self._sql_publish_many = _publish_many_statement(q)
        self._sql_receive = _receive_statement(q)
        self._sql_ack = (
            f"DELETE FROM {q}.messages m USING unnest(%(ack_seqs)s::bigint[], "
            "%(ack_receipts)s::uuid[]) AS a(seq, receipt) "
            "WHERE m.seq = a.seq AND m.receipt = a.receipt RETURNING m.receipt"
        )
        self._sql_next_visible = (
            f"SELECT EXTRACT(EPOCH FROM min(visible_at) - clock_timestamp()) FROM {q}.messages"
        )
        self.db.every(settings.expire_every, self.sweep_dedup, "dedup sweep")

    # -- Publisher ---------------------------------------------------------------------------

    def publish(
        self,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> None:
        params = {
            "mid": dedup_id or secrets.token_hex(8),
            "body": bytes(body),
            "attrs": json.dumps({str(k): str(v) for k, v in (attributes or {}).items()}),
            "delay": max(0.0, float(delay)),
            "channel": self.channel,
            "window": self.dedup_window,
        }
        sql = self._sql_publish if dedup_id is None else self._sql_publish_dedup

        def work(conn: psycopg.Connection[Any]) -> bool:
            return self.db.execute(conn, sql, params).fetchone() is not None

        published = self.db.run(work, what="publish", writes=True)
        if not published:
            log.debug("publish of %s suppressed: seen within the dedup window", dedup_id)

    def publish_many(self, messages: Sequence[Outgoing]) -> None:
        """All of ``messages`` in **one statement** (all or nothing), in order, each as
        :meth:`publish` would (a dedup id seen within the window, or earlier in the batch,
        enqueues nothing); one ``NOTIFY``."""
        if not messages:
            return
        params = {
            "mids": [m.dedup_id or secrets.token_hex(8) for m in messages],
            "bodies": [bytes(m.body) for m in messages],
            "attrs": [
                json.dumps({str(k): str(v) for k, v in (m.attributes or {}).items()})
                for m in messages
            ],
            "delays": [max(0.0, float(m.delay)) for m in messages],
            "dedup": [m.dedup_id is not None for m in messages],
            "channel": self.channel,
            "window": self.dedup_window,
        }

        def work(conn: psycopg.Connection[Any]) -> int:
            row = self.db.execute(conn, self._sql_publish_many, params).fetchone()
            return int(row[0]) if row else 0

        published = self.db.run(work, what="publish", writes=True)
        if published < len(messages):
            log.debug(
                "publish of %d message(s): %d suppressed (seen within the dedup window)",
                len(messages),
                len(messages) - published,
            )

    # -- Consumer ----------------------------------------------------------------------------

    def receive(
        self, max_messages: int = 1, *, visibility: float = 60.0, wait: float = 0.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + max(0.0, wait)
        wakeups = self._listener() if wait > 0 else None
        while True:
            generation = wakeups.generation if wakeups else 0
            found, next_in = self._receive_now(max_messages, visibility, wanted_next=wait > 0)
            remaining = deadline - time.monotonic()
            if found or remaining <= 0 or wakeups is None:
                return found
            pause = min(remaining, SAFETY_POLL if wakeups.listening else FALLBACK_POLL)
            if next_in is not None:
                pause = min(pause, max(0.01, next_in))
            wakeups.wait(generation, pause)

    def _receive_now(
        self, max_messages: int, visibility: float, *, wanted_next: bool
    ) -> tuple[list[Delivery], float | None]:
        acks = self._acks.take()
        params = {
            "max": max_messages,
            "visibility": visibility,
            "limit": self.max_deliveries,
            **_ack_params(acks),
        }
        settled: list[Any] = []

        def work(conn: psycopg.Connection[Any]) -> tuple[list[Delivery], float | None]:
            rows = self.db.execute(conn, self._sql_receive, params).fetchall()
            settled[:] = rows[0][0] if rows else []
            out = [
                Delivery(
                    message_id=r[2],
                    body=bytes(r[3]),
                    attributes=dict(r[4]),
                    attempt=int(r[5]),
                    handle=(int(r[1]), r[7]),
                    enqueued_at=r[6],
                )
                for r in rows
                if r[1] is not None
            ]
            if out or not wanted_next:
                return out, None
            row = self.db.execute(conn, self._sql_next_visible).fetchone()
            return out, (float(row[0]) if row and row[0] is not None else None)

        try:
            result = self.db.run(work, what="receive", writes=True)
        except BaseException:
            self._acks.put_back(acks)  # rolled back (or unknown): sent again later
            raise
        self._report_ignored(acks, settled)
        return result

    def _settle(self, delivery: Delivery, what: str, sql: str, params: dict[str, Any]) -> bool:
        seq, receipt = delivery.handle
        params = {**params, "seq": seq, "receipt": receipt, "channel": self.channel}

        def work(conn: psycopg.Connection[Any]) -> bool:
            return bool(self.db.execute(conn, sql, params).rowcount)

        settled = self.db.run(work, what=what, writes=True)
        if not settled:
            log.warning(
                "%s of %s changed nothing: its visibility ran out and another receiver holds "
                "it (or it was settled already)",
                what,
                delivery.message_id,
                extra={"event": "queue.settle_ignored", "message_id": delivery.message_id},
            )
        return settled

    def ack(self, delivery: Delivery) -> None:
        """Buffered (module docs): sent with the next receive, or within ``ack_flush``."""
        seq, receipt = delivery.handle
        ack = PendingAck(int(seq), receipt, delivery.message_id)
        if self.ack_flush > 0 and self._acks.add(ack):
            return
        self._send_acks([ack])

    def flush_acks(self) -> None:
        """Send the buffered acks now (raises :class:`StoreUnavailable` & co. if the database
        does not take them; they stay buffered then)."""
        self._acks.flush()

    def _send_acks(self, acks: list[PendingAck]) -> None:
        params = _ack_params(acks)

        def work(conn: psycopg.Connection[Any]) -> list[Any]:
            return [r[0] for r in self.db.execute(conn, self._sql_ack, params).fetchall()]

        self._report_ignored(acks, self.db.run(work, what="ack", writes=True))

    def _report_ignored(self, acks: list[PendingAck], settled: list[Any]) -> None:
        done = set(settled)
        for ack in acks:
            if ack.receipt not in done:
                log.warning(
                    "ack of %s changed nothing: its visibility ran out and another receiver "
                    "holds it (or it was settled already)",
                    ack.message_id,
                    extra={"event": "queue.settle_ignored", "message_id": ack.message_id},
                )

    def retry(self, delivery: Delivery, delay: float) -> None:
        self._settle(
            delivery,
            "retry",
            f"WITH upd AS (UPDATE {self._q}.messages SET receipt = NULL, "
            "visible_at = clock_timestamp() + %(delay)s * interval '1 second' "
            "WHERE seq = %(seq)s AND receipt = %(receipt)s RETURNING 1) "
            "SELECT pg_notify(%(channel)s, '') FROM upd",
            {"delay": max(0.0, float(delay))},
        )

    def extend(self, delivery: Delivery, visibility: float) -> None:
        self._settle(
            delivery,
            "extend",
            f"UPDATE {self._q}.messages "
            "SET visible_at = clock_timestamp() + %(visibility)s * interval '1 second' "
            "WHERE seq = %(seq)s AND receipt = %(receipt)s",
            {"visibility": float(visibility)},
        )

    def dead_letter(self, delivery: Delivery, reason: str, description: str = "") -> None:
        self._settle(
            delivery,
            "dead_letter",
            f"WITH gone AS (DELETE FROM {self._q}.messages "
            "WHERE seq = %(seq)s AND receipt = %(receipt)s RETURNING *) "
            f"INSERT INTO {self._q}.dead_letters (seq, message_id, body, attributes, attempts, "
            "enqueued_at, reason, description) "
            "SELECT seq, message_id, body, attributes, attempt, enqueued_at, %(reason)s, "
            "%(description)s FROM gone",
            {
                "reason": _text(reason or "Unspecified"),
                "description": _text(redact(description or "")),
            },
        )

    # -- DeadLetters -------------------------------------------------------------------------

    def dlq_depth(self) -> int:
        def work(conn: psycopg.Connection[Any]) -> int:
            row = self.db.execute(conn, f"SELECT count(*) FROM {self._q}.dead_letters").fetchone()
            return int(row[0]) if row else 0

        return self.db.run(work, what="dlq depth", writes=False)

    def dlq_peek(self, limit: int = 10) -> list[DeadLetter]:
        sql = (
            "SELECT message_id, body, attributes, reason, description, attempts, "
            f"dead_lettered_at FROM {self._q}.dead_letters "
            "ORDER BY dead_lettered_at, seq LIMIT %s"
        )

        def work(conn: psycopg.Connection[Any]) -> list[DeadLetter]:
            return [
                DeadLetter(
                    message_id=r[0],
                    body=bytes(r[1]),
                    attributes=dict(r[2]),
                    reason=r[3],
                    description=r[4],
                    attempts=int(r[5]),
                    dead_lettered_at=r[6],
                )
                for r in self.db.execute(conn, sql, (limit,)).fetchall()
            ]

        return self.db.run(work, what="dlq peek", writes=False)

    def redrive(self, limit: int = 10) -> int:
        """Move at most ``limit`` dead letters back (oldest first), in one statement, each with
        :data:`REDRIVE_ATTRIBUTE` incremented and a fresh delivery budget."""
        if limit < 1:
            raise ValueError("redrive limit must be at least 1")
        q = self._q
        generation = (
            f"CASE WHEN attributes ->> '{REDRIVE_ATTRIBUTE}' ~ '^[0-9]{{1,9}}$' "
            f"THEN (attributes ->> '{REDRIVE_ATTRIBUTE}')::integer ELSE 0 END + 1"
        )
        sql = (
            f"WITH moved AS (DELETE FROM {q}.dead_letters WHERE seq IN ("
            f"SELECT seq FROM {q}.dead_letters ORDER BY dead_lettered_at, seq LIMIT %(limit)s "
            "FOR UPDATE SKIP LOCKED) RETURNING *), "
            f"ins AS (INSERT INTO {q}.messages (message_id, body, attributes, visible_at, "
            "enqueued_at) SELECT message_id, body, "
            f"attributes || jsonb_build_object('{REDRIVE_ATTRIBUTE}', ({generation})::text), "
            "clock_timestamp(), enqueued_at FROM moved ORDER BY dead_lettered_at, seq "
            "RETURNING seq) "
            "SELECT count(*), pg_notify(%(channel)s, '') FROM ins"
        )

        def work(conn: psycopg.Connection[Any]) -> int:
            row = self.db.execute(conn, sql, {"limit": limit, "channel": self.channel}).fetchone()
            return int(row[0]) if row else 0

        return self.db.run(work, what="redrive", writes=True)

    def dlq_remove(self, message_ids: Sequence[str]) -> int:
        """Delete the dead letters with these message ids, in one statement."""
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return 0
        sql = f"DELETE FROM {self._q}.dead_letters WHERE message_id = ANY(%s)"

        def work(conn: psycopg.Connection[Any]) -> int:
            return int(self.db.execute(conn, sql, (ids,)).rowcount)

        return self.db.run(work, what="dlq remove", writes=True)

    def depth(self) -> int:
        """Messages waiting or in flight (not dead-lettered); buffered acks are sent first."""
        self.flush_acks()

        def work(conn: psycopg.Connection[Any]) -> int:
            row = self.db.execute(conn, f"SELECT count(*) FROM {self._q}.messages").fetchone()
            return int(row[0]) if row else 0

        return self.db.run(work, what="depth", writes=False)

    # -- housekeeping ------------------------------------------------------------------------

    def sweep_dedup(self, limit: int | None = None) -> int:
        """Forget at most ``limit`` (default ``expire_batch``) dedup ids older than the window."""
        sql = (
            f"DELETE FROM {self._q}.dedup WHERE dedup_id = ANY(ARRAY("
            f"SELECT dedup_id FROM {self._q}.dedup "
            "WHERE seen_at < clock_timestamp() - %s * interval '1 second' "
            "ORDER BY seen_at LIMIT %s FOR UPDATE SKIP LOCKED))"
        )
        batch = limit or self.settings.expire_batch

        def work(conn: psycopg.Connection[Any]) -> int:
            return int(self.db.execute(conn, sql, (self.dedup_window, batch)).rowcount)

        return self.db.run(work, what="dedup sweep", writes=True)

    def _listener(self) -> _Wakeups:
        with self._wake_guard:
            if self._wakeups is None:
                self._wakeups = _Wakeups(self.db, self.channel)
                self._wakeups.start()
            wakeups = self._wakeups
        wakeups.wait_listening(LISTEN_READY_TIMEOUT)
        return wakeups

    def close(self) -> None:
        """Send the buffered acks, stop the listener, close an owned pool. Idempotent. If the
        acks cannot be sent, logs an error naming them (their messages will be delivered again
        and refused by the claim as duplicates) and closes anyway."""
        try:
            self._acks.close()
        except Exception as exc:
            lost = self._acks.take()
            log.error(
                "closing the queue: %d ack(s) not sent (%s): their messages will be delivered "
                "again and refused as duplicates: %s",
                len(lost),
                redact(str(exc)),
                ", ".join(a.message_id for a in lost),
                extra={"event": "queue.acks_unsent", "count": len(lost)},
            )
        with self._wake_guard:
            wakeups, self._wakeups = self._wakeups, None
        if wakeups is not None:
            wakeups.stop()
        if self._owns_db:
            self.db.close()


def _ack_params(acks: list[PendingAck]) -> dict[str, Any]:
    return {"ack_seqs": [a.seq for a in acks], "ack_receipts": [a.receipt for a in acks]}


def _text(value: str) -> str:
    """``value`` storable in a text column (PostgreSQL text cannot hold NUL characters)."""
    return value.replace("\x00", "\\x00")


class _Wakeups(threading.Thread):
    """One ``LISTEN`` connection; every notification bumps :attr:`generation` and wakes the
    receivers waiting in :meth:`wait`. Reconnects with backoff; a reconnect also wakes them
    (they may have missed notifications while it was down)."""

    def __init__(self, db: Database, channel: str) -> None:
        super().__init__(name="cronwarden-pg-listen", daemon=True)
        self._db = db
        self._channel = channel
        self._cond = threading.Condition()
        self.generation = 0
        self._listening = threading.Event()
        self._stopping = threading.Event()
        self._conn: Any = None

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    def wait_listening(self, timeout: float) -> None:
        self._listening.wait(timeout)

    def wait(self, generation: int, timeout: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.generation != generation, timeout)

    def _bump(self) -> None:
        with self._cond:
            self.generation += 1
            self._cond.notify_all()

    def run(self) -> None:
        import psycopg
        from psycopg import sql

        backoff = 0.2
        while not self._stopping.is_set():
            try:
                conn = psycopg.connect(
                    self._db.settings.dsn, **self._db.connect_kwargs("cronwarden-listen")
                )
            except psycopg.Error as exc:
                log.warning(
                    "LISTEN connection to %s failed: %s; receivers poll until it is back",
                    self._db.settings.display_dsn,
                    redact(str(exc)),
                )
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            self._conn = conn
            try:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self._listening.set()
                self._bump()
                backoff = 0.2
                while not self._stopping.is_set():
                    for _ in conn.notifies(timeout=1.0):
                        self._bump()
                        if self._stopping.is_set():
                            break
            except psycopg.Error as exc:
                if not self._stopping.is_set():
                    log.warning("LISTEN connection lost: %s; reconnecting", redact(str(exc)))
            finally:
                self._listening.clear()
                with contextlib.suppress(Exception):
                    conn.close()
                self._conn = None
            self._bump()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=10)


def _publish_many_statement(q: str) -> str:
    """A batch publish as one plain statement: the messages as parallel arrays (``mids``,
    ``bodies``, ``attrs``, ``delays``, ``dedup``: whether ``mid`` is a dedup id). A dedup id is
    recorded once (its first occurrence in the batch) and enqueues only when fresh, as in a
    single publish; messages are inserted in the batch's order (ascending ``seq``). Returns
    one row: how many were enqueued (and one ``NOTIFY`` when any were)."""
    batch = (
        "SELECT * FROM unnest(%(mids)s::text[], %(bodies)s::bytea[], %(attrs)s::text[], "
        "%(delays)s::float8[], %(dedup)s::boolean[]) WITH ORDINALITY "
        "AS b(mid, body, attrs, delay, dedup, ord)"
    )
    return (
        f"WITH batch AS MATERIALIZED ({batch}), "
        "firsts AS MATERIALIZED (SELECT DISTINCT ON (mid) mid, ord FROM batch WHERE dedup "
        "ORDER BY mid, ord), "
        f"fresh AS (INSERT INTO {q}.dedup AS d (dedup_id, seen_at) "
        "SELECT mid, clock_timestamp() FROM firsts ON CONFLICT (dedup_id) DO UPDATE "
        "SET seen_at = EXCLUDED.seen_at "
        "WHERE d.seen_at < clock_timestamp() - %(window)s * interval '1 second' "
        "RETURNING dedup_id), "
        f"ins AS (INSERT INTO {q}.messages (message_id, body, attributes, visible_at, "
        "enqueued_at) SELECT b.mid, b.body, b.attrs::jsonb, "
        "clock_timestamp() + b.delay * interval '1 second', clock_timestamp() FROM batch b "
        "WHERE NOT b.dedup OR b.ord IN (SELECT f.ord FROM firsts f JOIN fresh "
        "ON fresh.dedup_id = f.mid) ORDER BY b.ord RETURNING seq) "
        "SELECT n, CASE WHEN n > 0 THEN pg_notify(%(channel)s, '') END "
        "FROM (SELECT count(*) AS n FROM ins) c"
    )


def _receive_statement(q: str) -> str:
    """A receive as **one plain statement** that executes no other (what the schema's
    ``receive_messages`` function does with a statement per message): take up to ``max``
    visible messages oldest first (``FOR UPDATE SKIP LOCKED``: concurrent receivers never wait
    for each other or take the same message); one delivered ``limit`` times unsettled (or its
    own ``cw-max-deliveries`` attribute) moves to the dead letters, every other one becomes
    invisible until now + ``visibility`` with attempt + 1 and a fresh receipt. Returned in
    the order taken. One server clock reading for the whole statement.

    The same statement first deletes the buffered acks (``ack_seqs`` / ``ack_receipts``, each
    only with its receipt still current; never taken again here) and returns the receipts it
    deleted in the first column of every row: there is always one row, whose other columns
    are NULL when nothing was taken."""
    limit = (
        f"CASE WHEN m.attributes ->> '{MAX_DELIVERIES_ATTRIBUTE}' ~ '^[0-9]{{1,6}}$' "
        f"THEN (m.attributes ->> '{MAX_DELIVERIES_ATTRIBUTE}')::integer ELSE %(limit)s END"
    )
    return (
        "WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t), "
        f"acked AS (DELETE FROM {q}.messages m USING unnest(%(ack_seqs)s::bigint[], "
        "%(ack_receipts)s::uuid[]) AS a(seq, receipt) "
        "WHERE m.seq = a.seq AND m.receipt = a.receipt RETURNING m.receipt), "
        f"picked AS MATERIALIZED (SELECT m.seq, m.visible_at, m.attempt >= {limit} AS spent "
        f"FROM {q}.messages m, now WHERE m.visible_at <= now.t "
        "AND m.seq <> ALL(%(ack_seqs)s::bigint[]) "
        "ORDER BY m.visible_at, m.seq LIMIT %(max)s FOR UPDATE OF m SKIP LOCKED), "
        f"gone AS (DELETE FROM {q}.messages m USING picked p WHERE m.seq = p.seq AND p.spent "
        "RETURNING m.*), "
        f"buried AS (INSERT INTO {q}.dead_letters (seq, message_id, body, attributes, "
        "attempts, enqueued_at, reason, description) "
        "SELECT seq, message_id, body, attributes, attempt, enqueued_at, "
        "'MaxDeliveryCountExceeded', format('not settled after %%s deliveries', attempt) "
        "FROM gone), "
        f"taken AS (UPDATE {q}.messages m SET attempt = m.attempt + 1, "
        "visible_at = now.t + %(visibility)s * interval '1 second', "
        "receipt = gen_random_uuid() FROM picked p, now WHERE m.seq = p.seq AND NOT p.spent "
        "RETURNING m.seq, m.message_id, m.body, m.attributes, m.attempt, m.enqueued_at, "
        "m.receipt) "
        "SELECT a.done, t.seq, t.message_id, t.body, t.attributes, t.attempt, t.enqueued_at, "
        "t.receipt FROM (SELECT array(SELECT receipt FROM acked) AS done) a "
        "LEFT JOIN (taken t JOIN picked p ON p.seq = t.seq) ON true "
        "ORDER BY p.visible_at, p.seq"
    )
