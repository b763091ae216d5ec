"""The provider's tables and server-side functions, created and migrated by the provider itself.

Migrations are numbered and applied in order, each in the same transaction as its row in
``<schema>.schema_migrations``. :func:`migrate` takes a transaction-scoped advisory lock first,
so any number of hosts may start at once: one applies what is missing, the others wait and then
find nothing left to do. A host whose schema is already current does not lock at all (one read),
so the runtime role needs no DDL privileges once an owner has migrated.

Why server-side functions: a store commit and a queue receive are each **one statement**, so
one network round trip and one transaction, with the per-op preconditions checked in order and
the whole commit rolled back (custom SQLSTATE ``CW001`` exists / ``CW002`` version, the op's
index in the error detail) when one fails.

Text columns use the ``"C"`` collation: ``query`` orders and ranges ids bytewise, like the
other stores, whatever the database's locale.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("cronwarden.postgres")

#: First key of the advisory lock (``pg_advisory_xact_lock(int, int)``); the second is
#: ``hashtext(schema)``. "CW" in ASCII, then 1.
ADVISORY_LOCK_CLASS = 0x43570001
CONFLICT_EXISTS = "CW001"
CONFLICT_VERSION = "CW002"

_V1 = r"""
CREATE TABLE @S@.records (
    kind text COLLATE "C" NOT NULL,
    job text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    data jsonb NOT NULL,
    version bigint NOT NULL,
    expire_at timestamptz,
    PRIMARY KEY (kind, job, id)
);
CREATE INDEX records_expire_at ON @S@.records (expire_at) WHERE expire_at IS NOT NULL;
-- One counter for the whole store: a version never repeats for a key, even across delete and
-- re-create, so a stale writer can never match.
CREATE SEQUENCE @S@.record_versions;

-- Merge semantics of cronwarden.model.ports.Merge: set fields, then add increments (missing or null
-- fields count as 0), then raise fields to at least the maximums (missing fields take them).
CREATE FUNCTION @S@.merge_data(base jsonb, fields jsonb, increments jsonb, maximums jsonb)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    WITH set_fields AS (SELECT base || fields AS d),
    added AS (
        SELECT d || COALESCE((
            SELECT jsonb_object_agg(key, COALESCE((d ->> key)::numeric, 0) + value::numeric)
            FROM jsonb_each(increments)), '{}'::jsonb) AS d
        FROM set_fields
    )
    SELECT d || COALESCE((
        SELECT jsonb_object_agg(key, CASE
            WHEN d -> key IS NULL OR jsonb_typeof(d -> key) = 'null' THEN value
            ELSE to_jsonb(GREATEST((d ->> key)::numeric, value::numeric)) END)
        FROM jsonb_each(maximums)), '{}'::jsonb)
    FROM added
$$;

-- One atomic commit of one job's ops (see cronwarden.model.ports.Store). Each op is a JSON object:
-- t = c(reate) | u(pdate) | d(elete) | m(erge); k = kind; i = id; d = data; v = version;
-- f / n / x = merge fields / increments / maximums; e = expire_at (ISO text or null).
-- Returns the new version per op (null for deletes).
CREATE FUNCTION @S@.commit_ops(p_job text, p_ops jsonb) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_clock bigint := nextval('@S@.record_versions');
    v_out bigint[] := ARRAY[]::bigint[];
    v_op jsonb;
    v_index bigint;
BEGIN
    FOR v_op, v_index IN SELECT value, ordinality - 1 FROM jsonb_array_elements(p_ops)
            WITH ORDINALITY LOOP
        CASE v_op ->> 't'
        WHEN 'c' THEN
            INSERT INTO @S@.records (kind, job, id, data, version, expire_at)
            VALUES (v_op ->> 'k', p_job, v_op ->> 'i', v_op -> 'd', v_clock,
                    (v_op ->> 'e')::timestamptz)
            ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'CW001', MESSAGE = 'record exists',
                    DETAIL = v_index::text;
            END IF;
            v_out := v_out || v_clock;
        WHEN 'u' THEN
            UPDATE @S@.records SET data = v_op -> 'd', version = v_clock,
                   expire_at = (v_op ->> 'e')::timestamptz
             WHERE kind = v_op ->> 'k' AND job = p_job AND id = v_op ->> 'i'
               AND version = (v_op ->> 'v')::bigint;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'CW002', MESSAGE = 'record changed or vanished',
                    DETAIL = v_index::text;
            END IF;
            v_out := v_out || v_clock;
        WHEN 'd' THEN
            DELETE FROM @S@.records
             WHERE kind = v_op ->> 'k' AND job = p_job AND id = v_op ->> 'i'
               AND version = (v_op ->> 'v')::bigint;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'CW002', MESSAGE = 'record changed or vanished',
                    DETAIL = v_index::text;
            END IF;
            v_out := v_out || NULL::bigint;
        WHEN 'm' THEN
          IF v_op -> 'n' = '{}'::jsonb AND v_op -> 'x' = '{}'::jsonb THEN
            -- fields only (ledger marks, most status writes): a plain jsonb concatenation
            INSERT INTO @S@.records AS r (kind, job, id, data, version, expire_at)
            VALUES (v_op ->> 'k', p_job, v_op ->> 'i', v_op -> 'f', v_clock,
                    (v_op ->> 'e')::timestamptz)
            ON CONFLICT (kind, job, id) DO UPDATE
               SET data = r.data || (v_op -> 'f'),
                   version = v_clock,
                   expire_at = COALESCE(EXCLUDED.expire_at, r.expire_at);
          ELSE
            INSERT INTO @S@.records AS r (kind, job, id, data, version, expire_at)
            VALUES (v_op ->> 'k', p_job, v_op ->> 'i',
                    @S@.merge_data('{}'::jsonb, v_op -> 'f', v_op -> 'n', v_op -> 'x'),
                    v_clock, (v_op ->> 'e')::timestamptz)
            ON CONFLICT (kind, job, id) DO UPDATE
               SET data = @S@.merge_data(r.data, v_op -> 'f', v_op -> 'n', v_op -> 'x'),
                   version = v_clock,
                   expire_at = COALESCE(EXCLUDED.expire_at, r.expire_at);
          END IF;
            v_out := v_out || v_clock;
        ELSE
            RAISE EXCEPTION 'unknown op type %', v_op ->> 't';
        END CASE;
    END LOOP;
    RETURN v_out;
END
$$;

CREATE TABLE @S@.messages (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id text NOT NULL,
    body bytea NOT NULL,
    attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
    attempt integer NOT NULL DEFAULT 0,
    visible_at timestamptz NOT NULL,
    enqueued_at timestamptz NOT NULL,
    receipt uuid
);
CREATE INDEX messages_visible ON @S@.messages (visible_at, seq);

CREATE TABLE @S@.dead_letters (
    seq bigint PRIMARY KEY,
    message_id text NOT NULL,
    body bytea NOT NULL,
    attributes jsonb NOT NULL,
    attempts integer NOT NULL,
    enqueued_at timestamptz NOT NULL,
    reason text NOT NULL,
    description text NOT NULL DEFAULT '',
    dead_lettered_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX dead_letters_order ON @S@.dead_letters (dead_lettered_at, seq);

CREATE TABLE @S@.dedup (
    dedup_id text PRIMARY KEY,
    seen_at timestamptz NOT NULL
);
CREATE INDEX dedup_seen_at ON @S@.dedup (seen_at);

-- Receive up to p_max visible messages: each becomes invisible until now + p_visibility with a
-- fresh receipt and attempt + 1. A message already delivered p_max_deliveries times without
-- settlement (or its own cw-max-deliveries attribute) moves to the dead letters instead.
-- SKIP LOCKED: concurrent receivers never wait for each other or take the same message.
CREATE FUNCTION @S@.receive_messages(p_max integer, p_visibility double precision,
                                     p_max_deliveries integer)
RETURNS TABLE (seq bigint, message_id text, body bytea, attributes jsonb, attempt integer,
               enqueued_at timestamptz, receipt uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r record;
    v_now timestamptz := clock_timestamp();
    v_limit integer;
BEGIN
    FOR r IN SELECT m.* FROM @S@.messages m WHERE m.visible_at <= v_now
              ORDER BY m.visible_at, m.seq LIMIT p_max FOR UPDATE SKIP LOCKED LOOP
        v_limit := CASE WHEN r.attributes ->> 'cw-max-deliveries' ~ '^[0-9]{1,6}$'
                        THEN (r.attributes ->> 'cw-max-deliveries')::integer
                        ELSE p_max_deliveries END;
        IF r.attempt >= v_limit THEN
            DELETE FROM @S@.messages WHERE seq = r.seq;
            INSERT INTO @S@.dead_letters (seq, message_id, body, attributes, attempts,
                                         enqueued_at, reason, description)
            VALUES (r.seq, r.message_id, r.body, r.attributes, r.attempt, r.enqueued_at,
                    'MaxDeliveryCountExceeded',
                    format('not settled after %s deliveries', r.attempt));
        ELSE
            RETURN QUERY
            UPDATE @S@.messages SET attempt = attempt + 1,
                   visible_at = v_now + p_visibility * interval '1 second',
                   receipt = gen_random_uuid()
             WHERE seq = r.seq
            RETURNING seq, message_id, body, attributes, attempt, enqueued_at, receipt;
        END IF;
    END LOOP;
END
$$;
"""

_V2 = r"""
-- A refused precondition of a commit sent as one plain statement (see .commit_sql): raised
-- from the statement's final CASE, with the same SQLSTATE and detail as commit_ops. RAISE is
-- not a statement: the commit still executes exactly one.
CREATE FUNCTION @S@.refuse(p_code text, p_op integer) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = p_code,
        MESSAGE = CASE p_code WHEN 'CW001' THEN 'record exists'
                              ELSE 'record changed or vanished' END,
        DETAIL = p_op::text;
END
$$;
"""

# The watcher's due query (Store.query_due): one partial index per due field of the status
# records, on the field as a number (a row whose field is not a number is not in the index:
# never due, and never an error on write).
_V_DUE = r"""
CREATE INDEX records_due_at ON @S@.records (((data ->> 'due_at')::numeric))
    WHERE kind = 'status' AND jsonb_typeof(data -> 'due_at') = 'number';
CREATE INDEX records_watch_due ON @S@.records (((data ->> 'watch_due')::numeric))
    WHERE kind = 'status' AND jsonb_typeof(data -> 'watch_due') = 'number';
"""

#: (version, description, SQL with ``@S@`` for the quoted schema name). Append only.
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "records, versions, commit function, queue, dead letters, dedup", _V1),
    (2, "refuse(): a commit's refused precondition raised from one plain statement", _V2),
    (3, "indexes of the status records' due fields (the watcher's due query)", _V_DUE),
)
LATEST = MIGRATIONS[-1][0]


def quoted(schema: str) -> str:
    """The schema as a quoted identifier (names are validated by the settings already)."""
    return '"' + schema.replace('"', '""') + '"'


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel a schema's queue announces new messages on."""
    return f"cronwarden.{schema}"


def current_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """The highest applied migration, 0 when the schema has none yet (one query)."""
    row = conn.execute(
        "SELECT CASE WHEN to_regclass(%s) IS NULL THEN 0 ELSE -1 END",
        (f"{quoted(schema)}.schema_migrations",),
    ).fetchone()
    if row is None or row[0] == 0:
        return 0
    found = conn.execute(f"SELECT max(version) FROM {quoted(schema)}.schema_migrations").fetchone()
    return int(found[0] or 0) if found else 0


def migrate(conn: psycopg.Connection[Any], schema: str) -> list[int]:
    """Bring ``schema`` to :data:`LATEST`; returns the versions this call applied.

    Idempotent and safe to run from many hosts at once (see the module docs). A database that
    is *newer* than this code is left alone with a warning: migrations only ever add.
    """
    found = current_version(conn, schema)
    if found > LATEST:
        log.warning(
            "schema %s is at migration %s, newer than this cronwarden (%s): upgrade this host",
            schema,
            found,
            LATEST,
        )
    if found >= LATEST:
        return []
    q = quoted(schema)
    applied: list[int] = []
    with conn.transaction():
        conn.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (ADVISORY_LOCK_CLASS, schema)
        )
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {q}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {q}.schema_migrations (version integer PRIMARY KEY, "
            "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {int(r[0]) for r in conn.execute(f"SELECT version FROM {q}.schema_migrations")}
        for version, description, sql in MIGRATIONS:
            if version in done:
                continue
            conn.execute(sql.replace("@S@", q).encode())
            conn.execute(
                f"INSERT INTO {q}.schema_migrations (version, description) VALUES (%s, %s)",
                (version, description),
            )
            applied.append(version)
    if applied:
        log.info("schema %s migrated to version %s (applied %s)", schema, LATEST, applied)
    return applied
