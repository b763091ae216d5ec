"""A store commit as **one SQL statement that executes no other**: the run path at the floor.

``commit_ops`` (:mod:`.schema`) is one statement on the wire, but a PL/pgSQL function: the
server executes a statement per op, one for its loop and two per merge (``merge_data``), so a
claim or a completion costs 5 to 7 executed statements. A commit of up to :data:`MAX_OPS` ops is
sent instead as one statement of data-modifying CTEs, one per op, that the server plans and
runs as one (``pg_stat_statements`` counts 1)::

    WITH clock AS (SELECT nextval('<schema>.record_versions') AS v),
         o0 AS (INSERT … ON CONFLICT DO NOTHING RETURNING 1),          -- Create
         o1 AS (UPDATE … WHERE … AND version = %(v1)s RETURNING 1),   -- Update
         o2 AS (INSERT … ON CONFLICT (kind, job, id) DO UPDATE …)      -- Merge (in place)
    SELECT CASE WHEN NOT EXISTS (SELECT FROM o0) THEN <schema>.refuse('CW001', 0)
                WHEN NOT EXISTS (SELECT FROM o1) THEN <schema>.refuse('CW002', 1)
                … ELSE (SELECT v FROM clock) END

The contract is ``commit_ops``'s: every op gets the commit's one new version (deletes none); the
first op (by index) whose precondition fails raises ``CW001`` (exists) / ``CW002`` (version)
with its index in the detail, and the statement, so the whole commit, rolls back. The ``CASE``
reads the ops in index order, so they run, and take their row locks, in index order as the
function's loop did. Merges compute fields, increments and maxima in place with
``merge_data``'s semantics, one term per counter (no sub-query: see :func:`_merged`). The ops
of one commit touch distinct records (the port's rule), so running them on one snapshot
changes nothing.
Larger commits (ledger pages in bulk) still go through ``commit_ops``: one statement text per
op count would not be worth preparing.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from cronwarden.model.ports import Create, Delete, Merge, Op, Update

from .schema import CONFLICT_EXISTS, CONFLICT_VERSION

#: commits of at most this many ops are one plain statement (claims, completions, lease
#: renewals, ledger batches of a few pages); larger ones call ``commit_ops``
MAX_OPS = 8


def shape(ops: list[Op]) -> tuple[str, ...]:
    """What the statement text depends on: each op's type (and, for a merge, whether it
    has increments or maximums)."""
    out = []
    for op in ops:
        if isinstance(op, Create):
            out.append("c")
        elif isinstance(op, Update):
            out.append("u")
        elif isinstance(op, Delete):
            out.append("d")
        elif isinstance(op, Merge):
            # how many increments and maximums: each is its own expression (keys are
            # parameters, so the text never holds a caller's field name)
            counts = (len(op.increments), len(op.maximums))
            out.append("f" if counts == (0, 0) else f"m{counts[0]}.{counts[1]}")
        else:
            raise TypeError(f"unknown op {op!r}")
    return tuple(out)


def _merged(base: str, i: int, kind: str) -> str:
    """``merge_data(base, f, n, x)`` of op ``i`` (shape ``m<increments>.<maximums>``) as one
    expression, one term per counter field and no sub-query: ``merge_data`` walks the
    increments and the maximums with ``jsonb_each`` and ``jsonb_object_agg``, which cost
    about as much as the rest of a claim. The Merge names each field once (``check_merge``),
    so a counter field's value before the merge is ``base``'s own: the fields set and the
    other counters never touch it."""
    increments, maximums = (int(n) for n in kind[1:].split("."))
    out = f"{base} || %(f{i})s::jsonb"
    if increments:
        terms = ", ".join(
            f"%(nk{i}_{j})s::text, COALESCE(({base} ->> %(nk{i}_{j})s::text)::numeric, 0) "
            f"+ %(nv{i}_{j})s::numeric"
            for j in range(increments)
        )
        out += f" || jsonb_build_object({terms})"
    if maximums:
        terms = ", ".join(
            f"%(xk{i}_{j})s::text, CASE WHEN {base} -> %(xk{i}_{j})s::text IS NULL "
            f"OR jsonb_typeof({base} -> %(xk{i}_{j})s::text) = 'null' "
            f"THEN to_jsonb(%(xv{i}_{j})s::numeric) "
            f"ELSE to_jsonb(GREATEST(({base} ->> %(xk{i}_{j})s::text)::numeric, "
            f"%(xv{i}_{j})s::numeric)) END"
            for j in range(maximums)
        )
        out += f" || jsonb_build_object({terms})"
    return f"({out})"


@functools.lru_cache(maxsize=256)
def statement(q: str, ops: tuple[str, ...]) -> str:
    """The statement text for a commit of ``ops`` (a :func:`shape`) on quoted schema ``q``."""
    ctes = [f"clock AS (SELECT nextval('{q}.record_versions') AS v)"]
    checks = []
    target = f"{q}.records"
    for i, kind in enumerate(ops):
        where = f"kind = %(k{i})s AND job = %(job)s AND id = %(i{i})s"
        if kind == "c":
            body = (
                f"INSERT INTO {target} (kind, job, id, data, version, expire_at) "
                f"SELECT %(k{i})s, %(job)s, %(i{i})s, %(d{i})s::jsonb, clock.v, "
                f"%(e{i})s::timestamptz FROM clock ON CONFLICT DO NOTHING RETURNING 1"
            )
            code = CONFLICT_EXISTS
        elif kind == "u":
            body = (
                f"UPDATE {target} SET data = %(d{i})s::jsonb, "
                f"version = (SELECT v FROM clock), expire_at = %(e{i})s::timestamptz "
                f"WHERE {where} AND version = %(v{i})s::bigint RETURNING 1"
            )
            code = CONFLICT_VERSION
        elif kind == "d":
            body = f"DELETE FROM {target} WHERE {where} AND version = %(v{i})s::bigint RETURNING 1"
            code = CONFLICT_VERSION
        else:
            fresh = f"%(f{i})s::jsonb" if kind == "f" else _merged("'{}'::jsonb", i, kind)
            update = "r.data || EXCLUDED.data" if kind == "f" else _merged("r.data", i, kind)
            body = (
                f"INSERT INTO {target} AS r (kind, job, id, data, version, expire_at) "
                f"SELECT %(k{i})s, %(job)s, %(i{i})s, {fresh}, clock.v, "
                f"%(e{i})s::timestamptz FROM clock "
                f"ON CONFLICT (kind, job, id) DO UPDATE SET data = {update}, "
                "version = EXCLUDED.version, "
                "expire_at = COALESCE(EXCLUDED.expire_at, r.expire_at) RETURNING 1"
            )
            code = CONFLICT_VERSION  # an upsert always returns its row: never raised
        ctes.append(f"o{i} AS ({body})")
        checks.append(f"WHEN NOT EXISTS (SELECT FROM o{i}) THEN {q}.refuse('{code}', {i})")
    return (
        # named like the function in pg_stat_activity / pg_stat_statements: it does its work
        "/* cronwarden commit_ops */ WITH "
        + ", ".join(ctes)
        + " SELECT CASE "
        + " ".join(checks)
        + " ELSE (SELECT v FROM clock) END"
    )


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def parameters(job: str, encoded: list[dict[str, Any]]) -> dict[str, Any]:
    """The statement's parameters from the ops as ``commit_ops`` reads them (``_encode``)."""
    params: dict[str, Any] = {"job": job}
    for i, op in enumerate(encoded):
        params[f"k{i}"] = op["k"]
        params[f"i{i}"] = op["i"]
        if "d" in op:
            params[f"d{i}"] = _text(op["d"])
        if "v" in op:
            params[f"v{i}"] = op["v"]
        if "e" in op or op["t"] != "d":
            params[f"e{i}"] = op.get("e")
        if op["t"] == "m":
            params[f"f{i}"] = _text(op["f"])
            # counters as text: one parameter type whatever their size (one prepared plan)
            for j, (name, amount) in enumerate(op["n"].items()):
                params[f"nk{i}_{j}"], params[f"nv{i}_{j}"] = name, str(amount)
            for j, (name, amount) in enumerate(op["x"].items()):
                params[f"xk{i}_{j}"], params[f"xv{i}_{j}"] = name, str(amount)
    return params


__all__ = ["MAX_OPS", "parameters", "shape", "statement"]
