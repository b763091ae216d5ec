"""Who may act on the dashboard: the access token, the browser sessions that presented it (with
an idle and an absolute expiry), their CSRF tokens, the login rate limit and the same-origin
check of form posts.

Everything lives in the process: restarting the dashboard signs everyone out and forgets the
rate limit. Times come from ``timer`` (seconds, monotonic), never from the wall clock.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

SESSION_COOKIE = "cw_session"

#: past this many clients with recent failures, the limiter drops those whose window has passed
_PRUNE_AT = 1024


@dataclass
class _Session:
    started: float
    seen: float


class Access:
    """The token and its sessions. A session ends ``idle`` seconds after its last request or
    ``lifetime`` seconds after sign-in, whichever comes first, or at :meth:`close_session`."""

    def __init__(
        self,
        token: str | None,
        *,
        idle: float,
        lifetime: float,
        timer: Callable[[], float],
    ) -> None:
        self.token = token
        self.idle = idle
        self.lifetime = lifetime
        self._timer = timer
        self._secret = secrets.token_bytes(32)
        self._sessions: dict[str, _Session] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.token)

    def token_ok(self, presented: str | None) -> bool:
        """Constant-time comparison with the token; False when actions are off."""
        return bool(self.token and presented) and hmac.compare_digest(
            str(presented).encode(), str(self.token).encode()
        )

    def bearer_ok(self, request: Request) -> bool:
        """Whether ``Authorization: Bearer TOKEN`` carries the token."""
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.token_ok(presented.strip())

    def open_session(self) -> str:
        """A new session id (the token was just presented); expired sessions are dropped."""
        now = self._timer()
        for sid in [s for s, v in self._sessions.items() if not self._live(v, now)]:
            del self._sessions[sid]
        session = secrets.token_urlsafe(32)
        self._sessions[session] = _Session(started=now, seen=now)
        return session

    def session_of(self, request: Request) -> str | None:
        """The request's live session (its idle clock restarts), or None: none, unknown,
        expired (then forgotten) or signed out."""
        session = request.cookies.get(SESSION_COOKIE)
        state = self._sessions.get(session) if session else None
        if session is None or state is None:
            return None
        now = self._timer()
        if not self._live(state, now):
            del self._sessions[session]
            return None
        state.seen = now
        return session

    def close_session(self, session: str) -> None:
        self._sessions.pop(session, None)

    def _live(self, state: _Session, now: float) -> bool:
        return now - state.seen < self.idle and now - state.started < self.lifetime

    def csrf_for(self, session: str) -> str:
        return hmac.new(self._secret, session.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: str, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(
            self.csrf_for(session).encode(), str(presented).encode()
        )


class LoginLimiter:
    """At most ``attempts`` failed sign-ins per client within ``window`` seconds (a sliding
    window); further attempts are refused, right token or not, until the oldest failure ages
    out. A client is its peer address: behind a proxy every user shares the proxy's."""

    def __init__(self, attempts: int, window: float, timer: Callable[[], float]) -> None:
        self.attempts = attempts
        self.window = window
        self._timer = timer
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, client: str) -> int | None:
        """Whole seconds until ``client`` may try again, or None when it may try now."""
        failures = self._recent(client, self._timer())
        if len(failures) < self.attempts:
            return None
        return max(1, math.ceil(failures[0] + self.window - self._timer()))

    def failed(self, client: str) -> None:
        now = self._timer()
        self._recent(client, now).append(now)
        if len(self._failures) > _PRUNE_AT:
            for name in [c for c, f in self._failures.items() if not self._recent(c, now)]:
                del self._failures[name]

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(client, deque())
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        return failures


def same_origin(request: Request) -> bool:
    """Whether a form post may come from this dashboard's own pages.

    ``Sec-Fetch-Site`` decides when the browser sends it (it does over HTTPS and to loopback).
    Otherwise a real ``Origin`` must name this host; ``Origin: null`` (what a browser sends under
    ``Referrer-Policy: no-referrer``) and no ``Origin`` (a non-browser client) pass this check,
    leaving the session cookie (``SameSite=Strict``) and the session-bound CSRF token to decide.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return True
    return origin.split("://", 1)[-1] == request.headers.get("host", "")
