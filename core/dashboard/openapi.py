"""The OpenAPI 3.0 document of the dashboard's JSON API (written out: the API is small and
its schema is part of the contract)."""

from __future__ import annotations

from typing import Any

from ._timeline import STATES
from .views import JOB_STATES

_INSTANT = {
    "type": "object",
    "nullable": True,
    "properties": {
        "utc": {"type": "string"},
        "local": {"type": "string"},
        "zone": {"type": "string"},
    },
    "required": ["utc", "local", "zone"],
}


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_ERROR = _obj(["error"], error={"type": "string"})
_INT_N = {"type": "integer", "nullable": True}
_STR_N = {"type": "string", "nullable": True}

_JOB_ROW = _obj(
    ["name", "state", "alerts", "next_expected", "tags"],
    name={"type": "string"},
    description={"type": "string"},
    owner=_STR_N,
    tags={"type": "array", "items": {"type": "string"}},
    schedule={"type": "string"},
    timezone={"type": "string"},
    state={"type": "string", "enum": list(JOB_STATES)},
    last_status=_STR_N,
    alerts={
        "type": "array",
        "items": _obj(["kind", "text"], kind={"type": "string"}, text={"type": "string"}),
    },
    last_success_window=_INSTANT,
    last_success_at=_INSTANT,
    next_expected=_INSTANT,
    last_duration_ms=_INT_N,
    baseline={"type": "object", "nullable": True},
    consecutive_failures={"type": "integer"},
    open_windows=_INT_N,
    dead_letters={"type": "integer"},
    suspicious={"type": "array", "nullable": True, "items": {"type": "string"}},
    paused={"type": "boolean"},
    last_error=_STR_N,
    last_run_key=_STR_N,
    undelivered={
        "type": "array",
        "description": "alerts of this job no channel has received yet (the watcher's outbox)",
        "items": _obj(
            ["channel", "alert", "attempts", "failing", "unrouted"],
            channel={"type": "string"},
            alert={"type": "string"},
            attempts={"type": "integer"},
            failing={"type": "boolean"},
            error=_STR_N,
            unrouted={"type": "boolean"},
        ),
    },
)
_OVERVIEW = _obj(
    ["generated_at", "total_jobs", "jobs", "states"],
    generated_at=_INSTANT,
    dlq_depth=_INT_N,
    total_jobs={"type": "integer"},
    matching_jobs={"type": "integer"},
    states={"type": "object", "additionalProperties": {"type": "integer"}},
    owners={"type": "array", "items": {"type": "string"}},
    tags={"type": "array", "items": {"type": "string"}},
    filters={"type": "object"},
    undelivered_alerts={"type": "integer"},
    problem_jobs={
        "type": "integer",
        "description": "matching jobs that are problems (alerting, last run failed, dead "
        "letters, undelivered alerts): they come first, so they fill the first pages",
    },
    page={"type": "integer"},
    pages={"type": "integer"},
    page_size={"type": "integer"},
    first_row={"type": "integer", "description": "1-based position of the page's first row"},
    links={
        "type": "object",
        "description": "query strings of the first, previous, next and last page (same filters)",
        "properties": {k: _STR_N for k in ("first", "prev", "next", "last")},
    },
    jobs={"type": "array", "items": _JOB_ROW},
)
_WINDOW = _obj(
    ["window", "state", "run_key"],
    window={"type": "string"},
    local=_INSTANT,
    state={"type": "string", "enum": list(STATES)},
    run_key={"type": "string"},
    attempt={"type": "integer"},
    run_id=_STR_N,
    duration_ms=_INT_N,
    detail={"type": "string"},
)
_TIMELINE = _obj(
    ["job", "windows", "durations", "legend"],
    job={"type": "string"},
    timezone={"type": "string"},
    schedule={"type": "string"},
    owner=_STR_N,
    start=_INSTANT,
    end=_INSTANT,
    legend={"type": "array", "items": {"type": "string"}},
    counts={"type": "object", "additionalProperties": {"type": "integer"}},
    windows={"type": "array", "items": _WINDOW},
    durations={
        "type": "array",
        "items": _obj(
            ["window", "state"],
            window={"type": "string"},
            state={"type": "string"},
            duration_ms=_INT_N,
        ),
    },
)
_RUN = _obj(
    ["job", "window", "run_key", "state", "ledger"],
    job={"type": "string"},
    window={"type": "string"},
    window_time=_INSTANT,
    run_key={"type": "string"},
    state={"type": "string"},
    attempt=_INT_N,
    redrives=_INT_N,
    run_id=_STR_N,
    previous_run_id=_STR_N,
    worker=_STR_N,
    reason=_STR_N,
    started_at=_INSTANT,
    first_started_at=_INSTANT,
    finished_at=_INSTANT,
    lease_expires=_INSTANT,
    duration_ms=_INT_N,
    counters={"type": "object"},
    error=_STR_N,
    excused=_STR_N,
    excused_detail=_STR_N,
    ledger=_obj(
        ["items", "done", "uncertain", "quarantined"],
        items={"type": "integer"},
        done={"type": "integer"},
        uncertain={"type": "integer"},
        quarantined={"type": "integer"},
        released={"type": "integer"},
    ),
    lock={"type": "object", "nullable": True},
    last_skip={"type": "object", "nullable": True},
    other_fields={"type": "object"},
)
_LETTER = _obj(
    ["message_id", "reason", "attempts"],
    message_id={"type": "string"},
    run_key=_STR_N,
    job=_STR_N,
    window=_STR_N,
    reason={"type": "string"},
    description={"type": "string"},
    attempts={"type": "integer"},
    dead_lettered_at=_INSTANT,
    attributes={"type": "object", "additionalProperties": {"type": "string"}},
    body={"type": "string"},
)
_LETTERS = _obj(
    ["dlq_depth", "letters"], dlq_depth=_INT_N, letters={"type": "array", "items": _LETTER}
)


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


#: no or a wrong bearer token (every action); a missing token is a 401 too, never a 403
_UNAUTHORIZED = {
    **_json(_ERROR, "no or a wrong access token"),
    "headers": {"WWW-Authenticate": {"required": True, "schema": {"type": "string"}}},
}


def _path(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def _get(
    summary: str,
    schema: dict[str, Any],
    params: list[dict[str, Any]],
    errors: tuple[str, ...] = ("400",),
) -> dict[str, Any]:
    responses = {"200": _json(schema)}
    for code in errors:
        responses[code] = _json(_ERROR, "error")
    return {"get": {"summary": summary, "parameters": params, "responses": responses}}


def openapi_document(actions_enabled: bool) -> dict[str, Any]:
    """The document served at ``/api/openapi.json``."""
    paths: dict[str, Any] = {
        "/api/overview": _get(
            "A page of the jobs with their state, alerts, last success and next expected run; "
            "problem jobs first",
            _OVERVIEW,
            [
                _query("owner", {"type": "string"}, "only jobs of this owner"),
                _query("tag", {"type": "string"}, "only jobs with this tag"),
                _query("state", {"type": "string", "enum": list(JOB_STATES)}, "only this state"),
                _query(
                    "limit",
                    {"type": "integer", "minimum": 1, "maximum": 100000},
                    "jobs per page (default 100)",
                ),
                _query("page", {"type": "integer", "minimum": 1}, "page number (default 1)"),
            ],
        ),
        "/api/jobs/{job}/timeline": _get(
            "One cell per due window of a range, and the durations of recent runs",
            _TIMELINE,
            [
                _path("job", "job name"),
                _query("start", {"type": "string"}, "first window, like 2026-01-20T00:00Z"),
                _query("end", {"type": "string"}, "last window, like 2026-01-20T12:00Z"),
            ],
            ("400", "404"),
        ),
        "/api/jobs/{job}/runs/{window}": _get(
            "One window's run: attempts, worker, times, counters, ledger, error, skip reason",
            _RUN,
            [_path("job", "job name"), _path("window", "window, like 2026-01-20T02:00Z")],
            ("400", "404"),
        ),
        "/api/dead-letters": _get(
            "The dead-letter queue's depth and oldest letters (peeked, not consumed)",
            _LETTERS,
            [_query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "at most")],
        ),
        "/api/dead-letters/{message_id}": _get(
            "One dead letter in full", _LETTER, [_path("message_id", "message id")], ("404",)
        ),
    }
    if actions_enabled:
        paths["/api/actions/redrive"] = {
            "post": {
                "summary": "Move up to `limit` dead letters (oldest first) back to the queue",
                "security": [{"token": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _obj(
                                ["limit"],
                                limit={"type": "integer", "minimum": 1, "maximum": 100},
                            )
                        }
                    },
                },
                "responses": {
                    "200": _json(_obj(["redriven"], redriven={"type": "integer"})),
                    "400": _json(_ERROR, "a bad body, or no dead-letter queue to redrive"),
                    "401": _UNAUTHORIZED,
                    "403": _json(_ERROR, "actions disabled"),
                },
            }
        }
        for name, summary, required in _ACTIONS:
            paths[f"/api/actions/{name}"] = _action(summary, required)
    return {
        "openapi": "3.0.3",
        "info": {"title": "cronwarden dashboard", "version": "1"},
        "paths": paths,
        "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
    }


_STR = {"type": "string", "minLength": 1}

#: the job and window actions: name, summary, required body fields (each a string)
_ACTIONS = (
    (
        "resolve",
        "Account for a dead-lettered or failed window without running it",
        ["job", "window", "reason"],
    ),
    ("rerun", "Enqueue a finished window again as a new generation", ["job", "window"]),
    (
        "pause",
        "Pause a job (its scheduled fires become excused windows); a job paused already is "
        "refused (400) unless replace is true; until: an ISO time (none: until resumed)",
        ["job", "reason"],
    ),
    ("resume", "Resume a paused job", ["job"]),
)


def _action(summary: str, required: list[str]) -> dict[str, Any]:
    """A POST action taking the JSON body ``required`` and the bearer token."""
    body = _obj(required, **{name: _STR for name in required})
    if "reason" in required and "window" not in required:  # pause: its optional fields
        body["properties"].update(until={"type": "string"}, replace={"type": "boolean"})
    body["additionalProperties"] = False
    return {
        "post": {
            "summary": summary,
            "security": [{"token": []}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {
                "200": _json(_obj(["text"], text={"type": "string"})),
                "400": _json(_ERROR, "refused: the message says why"),
                "401": _UNAUTHORIZED,
                "403": _json(_ERROR, "actions disabled"),
                "404": _json(_ERROR, "unknown job"),
            },
        }
    }
