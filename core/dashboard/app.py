"""The dashboard's ASGI application (Starlette): server-rendered pages, a JSON API with its
OpenAPI document, and, when enabled with an access token, the redrive action.

Actions: the API takes ``Authorization: Bearer TOKEN`` (no cookie, so no cross-site request can
carry it); the HTML forms need a session cookie obtained by posting the token to ``/login``
(``HttpOnly``, ``SameSite=Strict``) *and* a CSRF token bound to that session in the form, and a
cross-origin ``Origin`` header is refused. Every action is logged like its CLI twin.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..jobs.definitions import JobSet
from ..model.logs import get_logger
from ..model.ports import DeadLetters, Store
from ..model.redaction import redact
from . import _window_actions, views
from .openapi import openapi_document
from .views import BadRequest, Dashboard, NotFound

HERE = Path(__file__).parent
SESSION_COOKIE = "cw_session"
MAX_REDRIVE = 100
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # same-origin, not no-referrer: with no-referrer Chromium sends "Origin: null" on form posts
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class _Headers(BaseHTTPMiddleware):
    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response


class Actions:
    """Action access: the token, the sessions that presented it, their CSRF tokens."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self._secret = secrets.token_bytes(32)
        self._sessions: set[str] = set()

    @property
    def enabled(self) -> bool:
        return bool(self.token)

    def token_ok(self, presented: str | None) -> bool:
        return bool(self.token and presented) and hmac.compare_digest(
            str(presented).encode(), str(self.token).encode()
        )

    def open_session(self) -> str:
        session = secrets.token_urlsafe(32)
        self._sessions.add(session)
        return session

    def session_of(self, request: Request) -> str | None:
        session = request.cookies.get(SESSION_COOKIE)
        return session if session in self._sessions else None

    def csrf_for(self, session: str) -> str:
        return hmac.new(self._secret, session.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: str, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(
            self.csrf_for(session).encode(), str(presented).encode()
        )


def create_app(
    jobs: JobSet,
    store: Store,
    dead_letters: DeadLetters | None,
    *,
    actions_token: str | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Starlette:
    """The dashboard over ``store`` and ``dead_letters``; actions only with ``actions_token``."""
    dash = Dashboard(jobs, store, dead_letters, clock or (lambda: datetime.now(UTC)))
    actions = Actions(actions_token)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals["state_label"] = _STATE_LABELS.get
    templates.env.globals["glyph"] = lambda state: _GLYPHS.get(state, "?")
    templates.env.globals["when"] = _when
    templates.env.globals["badge"] = _badge
    templates.env.filters["ms"] = _ms
    log = get_logger("dashboard")

    def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        session = actions.session_of(request)
        context.update(
            actions_enabled=actions.enabled,
            signed_in=session is not None,
            csrf=actions.csrf_for(session) if session else "",
        )
        return templates.TemplateResponse(request, name, context, status_code=status)

    def guarded(
        handler: Callable[[Request], Awaitable[Response]], *, html: bool
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except NotFound as exc:
                return _error(request, 404, str(exc), html)
            except BadRequest as exc:
                return _error(request, 400, str(exc), html)

        return run

    def _error(request: Request, status: int, text: str, html: bool) -> Response:
        if html:
            return page(request, "error.html", {"status": status, "message": redact(text)}, status)
        return JSONResponse({"error": redact(text)}, status_code=status)

    def _int(request: Request, name: str, default: int) -> int:
        text = request.query_params.get(name)
        if text is None or text == "":
            return default
        try:
            return int(text)
        except ValueError:
            raise BadRequest(f"{name} must be an integer") from None

    def _overview(request: Request) -> dict[str, Any]:
        q = request.query_params
        return views.overview(
            dash,
            owner=q.get("owner") or None,
            tag=q.get("tag") or None,
            state=q.get("state") or None,
            limit=_int(request, "limit", 1000),
        )

    def _timeline(request: Request) -> dict[str, Any]:
        q = request.query_params
        return views.timeline(
            dash, request.path_params["job"], start=q.get("start"), end=q.get("end")
        )

    def _run(request: Request) -> dict[str, Any]:
        return views.run_detail(dash, request.path_params["job"], request.path_params["window"])

    def _letters(request: Request) -> dict[str, Any]:
        return views.dead_letters(dash, limit=_int(request, "limit", 100))

    def _letter(request: Request) -> dict[str, Any]:
        return views.dead_letter(dash, request.path_params["message_id"])

    def api(build: Callable[[Request], dict[str, Any]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return JSONResponse(await run_in_threadpool(build, request))

        return guarded(endpoint, html=False)

    def html(
        build: Callable[[Request], dict[str, Any]], template: str
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            data = await run_in_threadpool(build, request)  # store reads block: off the loop
            return page(request, template, {"data": data, "query": request.query_params})

        return guarded(endpoint, html=True)

    def redrive(limit: int, actor: str) -> int:
        assert dead_letters is not None
        moved = dead_letters.redrive(limit)
        log.info(
            "redrove %d message(s) (dashboard, limit %d)",
            moved,
            limit,
            extra={"event": "dlq.redrive", "moved": moved, "limit": limit, "actor": actor},
        )
        return moved

    def _limit_of(value: Any) -> int:
        try:
            limit = int(value)
        except (TypeError, ValueError):
            raise BadRequest("limit must be an integer") from None
        if not 1 <= limit <= MAX_REDRIVE:
            raise BadRequest(f"limit must be between 1 and {MAX_REDRIVE}")
        return limit

    async def api_redrive(request: Request) -> Response:
        if not actions.enabled or dead_letters is None:
            return JSONResponse({"error": "actions are disabled on this dashboard"}, 403)
        auth = request.headers.get("authorization", "")
        scheme, _, presented = auth.partition(" ")
        if scheme.lower() != "bearer" or not actions.token_ok(presented.strip()):
            return JSONResponse({"error": "a valid access token is required"}, 401)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise BadRequest('the body must be a JSON object like {"limit": 1}')
        moved = await run_in_threadpool(redrive, _limit_of(body.get("limit", 1)), "api")
        return JSONResponse({"redriven": moved})

    def _same_origin(request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None or origin == "null":
            return origin is None
        host = request.headers.get("host", "")
        return origin.split("://", 1)[-1] == host

    async def form_redrive(request: Request) -> Response:
        if not actions.enabled or dead_letters is None:
            return _error(request, 403, "actions are disabled on this dashboard", True)
        session = actions.session_of(request)
        form = await request.form()
        if session is None:
            return _error(request, 401, "sign in with the access token first", True)
        if not _same_origin(request) or not actions.csrf_ok(session, str(form.get("csrf", ""))):
            return _error(request, 403, "the form's CSRF token is missing or wrong", True)
        moved = await run_in_threadpool(redrive, _limit_of(form.get("limit", 1)), "form")
        return RedirectResponse(f"/dead-letters?redriven={moved}", status_code=303)

    def act(name: str, body: dict[str, Any], actor: str) -> dict[str, Any]:
        return _window_actions.perform(
            name, body, jobs=jobs, store=store, queue=dead_letters, now=dash.clock, actor=actor
        )

    async def api_action(request: Request) -> Response:
        name = request.path_params["action"]
        if name not in _window_actions.NAMES:
            raise NotFound(f"no action {name!r}")
        if not actions.enabled:
            return JSONResponse({"error": "actions are disabled on this dashboard"}, 403)
        auth = request.headers.get("authorization", "")
        scheme, _, presented = auth.partition(" ")
        if scheme.lower() != "bearer" or not actions.token_ok(presented.strip()):
            return JSONResponse({"error": "a valid access token is required"}, 403)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise BadRequest('the body must be a JSON object like {"job": "J"}')
        return JSONResponse(await run_in_threadpool(act, name, body, "dashboard:api"))

    async def form_action(request: Request) -> Response:
        name = request.path_params["action"]
        if name not in _window_actions.NAMES:
            raise NotFound(f"no action {name!r}")
        if not actions.enabled:
            return _error(request, 403, "actions are disabled on this dashboard", True)
        session = actions.session_of(request)
        form = await request.form()
        if session is None:
            return _error(request, 403, "sign in with the access token first", True)
        if not _same_origin(request) or not actions.csrf_ok(session, str(form.get("csrf", ""))):
            return _error(request, 403, "the form's CSRF token is missing or wrong", True)
        body = {k: str(v) for k, v in form.items() if k != "csrf"}
        done = await run_in_threadpool(act, name, body, "dashboard:form")
        job = body.get("job", "")
        return RedirectResponse(
            f"/jobs/{quote(job, safe='')}?done={quote(str(done.get('text', name)))}",
            status_code=303,
        )

    async def login(request: Request) -> Response:
        if not actions.enabled:
            return _error(request, 403, "actions are disabled on this dashboard", True)
        if request.method == "GET":
            return page(request, "login.html", {})
        form = await request.form()
        if not _same_origin(request) or not actions.token_ok(str(form.get("token", ""))):
            return page(request, "login.html", {"failed": True}, 401)
        response = RedirectResponse("/dead-letters", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            actions.open_session(),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(actions.enabled))

    routes = [
        Route("/", html(_overview, "overview.html")),
        Route("/jobs/{job}", html(_timeline, "timeline.html")),
        Route("/jobs/{job}/runs/{window}", html(_run, "run.html")),
        Route("/dead-letters", html(_letters, "dead_letters.html")),
        Route("/dead-letters/{message_id}", html(_letter, "dead_letter.html")),
        Route("/login", guarded(login, html=True), methods=["GET", "POST"]),
        Route("/actions/redrive", guarded(form_redrive, html=True), methods=["POST"]),
        Route("/api/overview", api(_overview)),
        Route("/api/jobs/{job}/timeline", api(_timeline)),
        Route("/api/jobs/{job}/runs/{window}", api(_run)),
        Route("/api/dead-letters", api(_letters)),
        Route("/api/dead-letters/{message_id}", api(_letter)),
        Route("/api/actions/redrive", guarded(api_redrive, html=False), methods=["POST"]),
        Route("/api/actions/{action}", guarded(api_action, html=False), methods=["POST"]),
        Route("/actions/{action}", guarded(form_action, html=True), methods=["POST"]),
        Route("/api/openapi.json", openapi),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(_Headers)])


_STATE_LABELS = {
    "succeeded": "succeeded",
    "suspicious": "succeeded, suspicious",
    "running": "running",
    "failed": "failed, retrying",
    "dead_lettered": "dead-lettered",
    "excused": "excused (skip or pause)",
    "queued": "queued (within grace)",
    "gap": "gap: no run",
    "healthy": "healthy",
    "alerting": "alerting",
    "failing": "last run failed",
    "paused": "paused",
    "pending": "no run yet",
}


#: a shape per window state, so the timeline does not rely on colour alone
_GLYPHS = {
    "succeeded": "\u2713",  # check mark
    "suspicious": "!",
    "running": "\u25b6",  # play
    "failed": "\u2717",  # ballot x
    "dead_lettered": "\u2620",  # skull
    "excused": "\u2013",  # en dash
    "queued": "\u2026",  # ellipsis
    "gap": "?",
}


def _when(i: Any) -> Markup:
    """An instant from the views (``{utc, local, zone}``): local time, and UTC below it when
    the zone is not UTC. A Python function, not a Jinja macro: the overview calls it twice per
    row (macros cost a third of a 10,000-row page). ``Markup.format`` escapes every value."""
    if not i:
        return Markup("never")
    return _when_html(i["utc"], i["local"], i["zone"])


@functools.lru_cache(maxsize=8192)
def _when_html(utc: str, local_iso: str, zone: str) -> Markup:
    """Cached: an overview's rows share a few hundred distinct instants."""
    local = local_iso[:16].replace("T", " ")
    if zone == "UTC":
        return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(utc, local)
    return Markup(
        '<time datetime="{0}" title="{0}">{1} {2}</time><br><small>{3} UTC</small>'
    ).format(utc, local, zone, utc[:16].replace("T", " "))


@functools.lru_cache(maxsize=256)
def _badge(state: str) -> Markup:
    label = _STATE_LABELS.get(state) or state
    return Markup('<span class="badge s-{0}">{1}</span>').format(state, label)


def _ms(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    if value < 10_000:
        return f"{value:.0f} ms"
    if value < 600_000:
        return f"{value / 1000:.1f} s"
    return f"{value / 60_000:.1f} min"
