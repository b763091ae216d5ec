"""The dashboard's ASGI application (Starlette): server-rendered pages, a JSON API with its
OpenAPI document, and, when enabled with an access token, the actions.

Only the configured ``Host`` values are served (anything else answers 400: a page on another
site cannot reach the dashboard through DNS rebinding). Actions: the API takes
``Authorization: Bearer TOKEN`` (no cookie, so no cross-site request can carry it); the HTML
forms need a session cookie obtained by posting the token to ``/login`` (``HttpOnly``,
``SameSite=Strict``, ending when idle, at its lifetime or at ``/logout``) *and* a CSRF token
bound to that session in the form, and a cross-origin post is refused. No or wrong credentials
answer 401, credentials that do not allow the request 403. Every action is logged like its CLI
twin.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..jobs.definitions import JobSet
from ..model.logs import get_logger
from ..model.ports import DeadLetters, Store
from ..model.redaction import redact
from . import _banners, _window_actions, views
from ._access import SESSION_COOKIE, Access, LoginLimiter, same_origin
from .openapi import openapi_document
from .views import BadRequest, Dashboard, NotFound

HERE = Path(__file__).parent
MAX_REDRIVE = 100
#: the Host values served when the caller names none
DEFAULT_HOSTS = ("127.0.0.1", "localhost")
SESSION_IDLE = timedelta(minutes=30)
SESSION_LIFETIME = timedelta(hours=8)
LOGIN_ATTEMPTS = 5  #: failed sign-ins per client ...
LOGIN_WINDOW = timedelta(minutes=5)  #: ... within this sliding window
SECURITY_HEADERS = {
    # no inline script or style anywhere: every script and style is a file under /static
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; form-action 'self'; "
    "base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": "no-store",
}
_INTEGER = re.compile(r"-?[0-9]+")
_AUTHENTICATE = {"www-authenticate": 'Bearer realm="cronwarden dashboard"'}


class _Headers:
    """Adds :data:`SECURITY_HEADERS` to every HTTP response, errors and refusals included
    (a pure ASGI middleware: it wraps the host check too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def host_pattern(host: str) -> str:
    """``host`` as the ``Host`` header names it: an IPv6 literal in brackets, lower case."""
    host = host.strip().lower()
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


def create_app(
    jobs: JobSet,
    store: Store,
    dead_letters: DeadLetters | None,
    *,
    actions_token: str | None = None,
    clock: Callable[[], datetime] | None = None,
    allowed_hosts: Sequence[str] = DEFAULT_HOSTS,
    session_idle: timedelta = SESSION_IDLE,
    session_lifetime: timedelta = SESSION_LIFETIME,
    login_attempts: int = LOGIN_ATTEMPTS,
    login_window: timedelta = LOGIN_WINDOW,
    timer: Callable[[], float] = time.monotonic,
) -> Starlette:
    """The dashboard over ``store`` and ``dead_letters``; actions only with ``actions_token``.

    Serves only requests whose ``Host`` (port aside) is one of ``allowed_hosts`` (``*.domain``
    allowed, ``*`` refused); others answer 400. Sessions end ``session_idle`` after their last
    request or ``session_lifetime`` after sign-in; ``login_attempts`` failed sign-ins per client
    within ``login_window`` answer 429 with ``Retry-After`` until the oldest ages out. ``timer``
    (monotonic seconds) times sessions and sign-ins; ``clock`` is the pages' "now".
    """
    hosts = [host_pattern(h) for h in allowed_hosts]
    if not hosts or "*" in hosts:
        raise ValueError("allowed_hosts must name the served hosts; '*' would serve any Host")
    dash = Dashboard(jobs, store, dead_letters, clock or (lambda: datetime.now(UTC)))
    access = Access(
        actions_token,
        idle=session_idle.total_seconds(),
        lifetime=session_lifetime.total_seconds(),
        timer=timer,
    )
    limiter = LoginLimiter(login_attempts, login_window.total_seconds(), timer)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals["state_label"] = _STATE_LABELS.get
    templates.env.globals["glyph"] = lambda state: _GLYPHS.get(state, "?")
    templates.env.globals["when"] = _when
    templates.env.globals["badge"] = _badge
    templates.env.filters["ms"] = _ms
    log = get_logger("dashboard")

    def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        session = access.session_of(request)
        context.update(
            actions_enabled=access.enabled,
            signed_in=session is not None,
            csrf=access.csrf_for(session) if session else "",
            banner=_banners.banner(request.query_params, MAX_REDRIVE),
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

    async def http_error(request: Request, exc: Exception) -> Response:
        """Starlette's own refusals (no route 404, wrong method 405, a malformed form 400):
        JSON under /api/, the error page elsewhere."""
        assert isinstance(exc, HTTPException)
        html = not request.url.path.startswith("/api/")
        response = _error(request, exc.status_code, str(exc.detail), html)
        response.headers.update(exc.headers or {})
        return response

    def _param(request: Request, name: str) -> str | None:
        """A query parameter. The pages' filter forms send an empty value for "any"; the API
        takes an empty value as given (its document has no empty state or limit: 400)."""
        value = request.query_params.get(name)
        if value == "" and not request.url.path.startswith("/api/"):
            return None
        return value

    def _int(request: Request, name: str, default: int) -> int:
        text = _param(request, name)
        if text is None:
            return default
        if not _INTEGER.fullmatch(text):  # int() would take " 5", "+5" and "1_000" too
            raise BadRequest(f"{name} must be an integer")
        return int(text)

    def _overview(request: Request) -> dict[str, Any]:
        return views.overview(
            dash,
            owner=_param(request, "owner"),
            tag=_param(request, "tag"),
            state=_param(request, "state"),
            limit=_int(request, "limit", views.PAGE_SIZE),
            page=_int(request, "page", 1),
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

    def api_refusal(request: Request) -> Response | None:
        """403 when actions are off, 401 without the bearer token; None when allowed."""
        if not access.enabled:
            return JSONResponse({"error": "actions are disabled on this dashboard"}, 403)
        if not access.bearer_ok(request):
            return JSONResponse(
                {"error": "a valid access token is required (Authorization: Bearer TOKEN)"},
                401,
                headers=_AUTHENTICATE,
            )
        return None

    async def form_gate(request: Request) -> Response | tuple[str, FormData]:
        """The session and form of an action form post, or the refusal: 403 when actions are
        off, 401 without a live session, 403 for a missing or wrong CSRF token or another
        site's post."""
        if not access.enabled:
            return _error(request, 403, "actions are disabled on this dashboard", True)
        session = access.session_of(request)
        if session is None:
            return _error(
                request, 401, "sign in with the access token first (or again: sessions end)", True
            )
        form = await request.form()
        if not same_origin(request) or not access.csrf_ok(session, str(form.get("csrf", ""))):
            return _error(
                request, 403, "the form's CSRF token is missing or wrong, or it came from "
                "another site", True,
            )  # fmt: skip
        return session, form

    async def json_body(request: Request, example: str) -> dict[str, Any]:
        try:
            body = await request.json()
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the stack
            body = None
        if not isinstance(body, dict):
            raise BadRequest(f"the body must be a JSON object like {example}")
        return body

    def redrive(limit: int, actor: str) -> int:
        if dead_letters is None:
            raise BadRequest("this dashboard has no dead-letter queue to redrive")
        moved = dead_letters.redrive(limit)
        log.info(
            "redrove %d message(s) (dashboard, limit %d)",
            moved,
            limit,
            extra={"event": "dlq.redrive", "moved": moved, "limit": limit, "actor": actor},
        )
        return moved

    def _limit_in_range(limit: int) -> int:
        if not 1 <= limit <= MAX_REDRIVE:
            raise BadRequest(f"limit must be between 1 and {MAX_REDRIVE}")
        return limit

    async def api_redrive(request: Request) -> Response:
        refused = api_refusal(request)
        if refused is not None:
            return refused
        body = await json_body(request, '{"limit": 1}')
        if "limit" not in body:
            raise BadRequest("limit is required")
        limit = body["limit"]
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise BadRequest("limit must be an integer")
        moved = await run_in_threadpool(redrive, _limit_in_range(limit), "api")
        return JSONResponse({"redriven": moved})

    async def form_redrive(request: Request) -> Response:
        gate = await form_gate(request)
        if isinstance(gate, Response):
            return gate
        text = str(gate[1].get("limit", "")).strip()
        if not text.isascii() or not text.isdigit():
            raise BadRequest("limit must be a whole number")
        moved = await run_in_threadpool(redrive, _limit_in_range(int(text)), "form")
        return RedirectResponse(f"/dead-letters?done=redriven&moved={moved}", status_code=303)

    def act(name: str, body: dict[str, Any], actor: str) -> dict[str, Any]:
        return _window_actions.perform(
            name, body, jobs=jobs, store=store, queue=dead_letters, now=dash.clock, actor=actor
        )

    async def api_action(request: Request) -> Response:
        name = request.path_params["action"]
        if name not in _window_actions.NAMES:
            raise NotFound(f"no action {name!r}")
        refused = api_refusal(request)
        if refused is not None:
            return refused
        body = await json_body(request, '{"job": "J"}')
        return JSONResponse(await run_in_threadpool(act, name, body, "dashboard:api"))

    async def form_action(request: Request) -> Response:
        name = request.path_params["action"]
        if name not in _window_actions.NAMES:
            raise NotFound(f"no action {name!r}")
        gate = await form_gate(request)
        if isinstance(gate, Response):
            return gate
        body = {k: str(v) for k, v in gate[1].items() if k != "csrf"}
        done = await run_in_threadpool(act, name, body, "dashboard:form")
        job = body.get("job", "")
        code = _banners.action_code(name, done)
        return RedirectResponse(f"/jobs/{quote(job, safe='')}?done={code}", status_code=303)

    def _client(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    async def login(request: Request) -> Response:
        if not access.enabled:
            return _error(request, 403, "actions are disabled on this dashboard", True)
        if request.method == "GET":
            return page(request, "login.html", {})
        wait = limiter.retry_after(_client(request))
        if wait is not None:
            response = page(request, "login.html", {"retry_after": wait}, 429)
            response.headers["retry-after"] = str(wait)
            return response
        form = await request.form()
        if not same_origin(request):
            return _error(request, 403, "a sign-in posted from another site is refused", True)
        if not access.token_ok(str(form.get("token", ""))):
            limiter.failed(_client(request))
            return page(request, "login.html", {"failed": True}, 401)
        previous = access.session_of(request)
        if previous is not None:
            access.close_session(previous)
        response = RedirectResponse("/dead-letters?done=signed-in", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            access.open_session(),
            max_age=int(access.lifetime),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(request: Request) -> Response:
        session = access.session_of(request)
        if session is not None:
            form = await request.form()
            if not same_origin(request) or not access.csrf_ok(session, str(form.get("csrf", ""))):
                return _error(request, 403, "the form's CSRF token is missing or wrong", True)
            access.close_session(session)
        response = RedirectResponse("/?done=signed-out", status_code=303)
        response.delete_cookie(
            SESSION_COOKIE, httponly=True, samesite="strict", secure=request.url.scheme == "https"
        )
        return response

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(access.enabled))

    routes = [
        Route("/", html(_overview, "overview.html")),
        Route("/jobs/{job}", html(_timeline, "timeline.html")),
        Route("/jobs/{job}/runs/{window}", html(_run, "run.html")),
        Route("/dead-letters", html(_letters, "dead_letters.html")),
        Route("/dead-letters/{message_id}", html(_letter, "dead_letter.html")),
        Route("/login", guarded(login, html=True), methods=["GET", "POST"]),
        Route("/logout", guarded(logout, html=True), methods=["POST"]),
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
    middleware = [
        Middleware(_Headers),
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False),
    ]
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
    )


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
