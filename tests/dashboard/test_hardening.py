"""The dashboard opens no door (issue #28), each through HTTP: only configured Host values,
sessions that end (idle, absolute, sign-out), a rate-limited sign-in, 401 for no or wrong
credentials and 403 for credentials that do not allow the request, security headers on every
response, banners from a fixed table, and an OpenAPI document the behaviour keeps."""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from cronwarden.dashboard import create_app
from cronwarden.jobs.pause import pause_of
from cronwarden.model.records import run_key_of, status_key_of

from . import seed
from .conftest import HOSTS, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
WINDOW = "2026-01-20T12:00Z"
#: every action of the API with a body it would accept
API_ACTIONS = [
    ("/api/actions/redrive", {"limit": 1}),
    ("/api/actions/resolve", {"job": "dead", "window": WINDOW, "reason": "fixed by hand"}),
    ("/api/actions/rerun", {"job": "healthy", "window": WINDOW}),
    ("/api/actions/pause", {"job": "healthy", "reason": "maintenance"}),
    ("/api/actions/resume", {"job": "paused"}),
]
#: every action form with the fields its page posts (the CSRF token aside)
FORM_ACTIONS = [
    ("/actions/redrive", {"limit": "1"}),
    ("/actions/resolve", {"job": "dead", "window": WINDOW, "reason": "fixed by hand"}),
    ("/actions/rerun", {"job": "healthy", "window": WINDOW}),
    ("/actions/pause", {"job": "healthy", "reason": "maintenance"}),
    ("/actions/resume", {"job": "paused"}),
]


class Timer:
    """The app's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def timer() -> Timer:
    return Timer()


@pytest.fixture
def timed_app(provider: Any, timer: Timer) -> Any:
    return create_app(
        seed.jobs(),
        provider.store(),
        provider.queue(),
        actions_token=TOKEN,
        clock=lambda: seed.NOW,
        allowed_hosts=HOSTS,
        timer=timer,
    )


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)


def _sign_in(client: TestClient) -> str:
    """Sign ``client`` in; the CSRF token of its session."""
    response = client.post("/login", data={"token": TOKEN}, follow_redirects=False)
    assert response.status_code == 303, response.text
    return _csrf(client.get("/dead-letters").text)


def _state(provider: Any) -> tuple[int, Any, Any]:
    """What the actions change: the DLQ depth, the dead window's run and healthy's status."""
    store = provider.store()
    run = store.get(run_key_of("dead", WINDOW))
    status = store.get(status_key_of("healthy"))
    return provider.queue().dlq_depth(), run and run.data, status and status.data


# -- Host -----------------------------------------------------------------------------------
def test_a_foreign_host_is_refused_by_default(provider: Any) -> None:
    app = create_app(seed.jobs(), provider.store(), provider.queue(), clock=lambda: seed.NOW)
    for base in ("http://evil.example", "http://attacker.test:8420", "http://testserver"):
        response = TestClient(app, base_url=base).get("/api/overview")
        assert response.status_code == 400, base
        assert "nightly" not in response.text and "healthy" not in response.text
        assert response.headers["x-frame-options"] == "DENY"  # refusals carry the headers too
    for base in ("http://localhost:8420", "http://127.0.0.1:8420", "http://LOCALHOST"):
        assert TestClient(app, base_url=base).get("/api/overview").status_code == 200, base


def test_configured_hosts_are_served(provider: Any) -> None:
    app = create_app(
        seed.jobs(),
        provider.store(),
        provider.queue(),
        clock=lambda: seed.NOW,
        allowed_hosts=["dash.example.com", "*.internal.example", "::1"],
    )
    for base in ("http://dash.example.com", "http://a.internal.example:80", "http://[::1]:8420"):
        assert TestClient(app, base_url=base).get("/").status_code == 200, base
    for base in ("http://localhost", "http://example.com", "http://internal.example.evil"):
        assert TestClient(app, base_url=base).get("/").status_code == 400, base
    with pytest.raises(ValueError, match="any Host"):
        create_app(seed.jobs(), provider.store(), provider.queue(), allowed_hosts=["*"])


# -- sessions -------------------------------------------------------------------------------
def test_a_session_ends_when_idle(timed_app: Any, provider: Any, timer: Timer) -> None:
    client = TestClient(timed_app)
    csrf = _sign_in(client)
    for _ in range(3):  # each request restarts the idle clock
        timer.advance(25 * 60)
        assert "Sign out" in client.get("/").text
    timer.advance(30 * 60)
    assert "Sign in for actions" in client.get("/").text
    pause = {"job": "healthy", "reason": "maintenance", "csrf": csrf}
    refused = client.post("/actions/pause", data=pause)
    assert refused.status_code == 401 and "sign in" in refused.text.lower()
    assert pause_of(_state(provider)[2] or {}) is None


def test_a_session_ends_at_its_lifetime(timed_app: Any, provider: Any, timer: Timer) -> None:
    client = TestClient(timed_app)
    login = client.post("/login", data={"token": TOKEN}, follow_redirects=False)
    assert "max-age=28800" in login.headers["set-cookie"].lower()
    csrf = _csrf(client.get("/dead-letters").text)
    for _ in range(int(8 * 60 / 20) - 1):  # busy all day, never idle for long
        timer.advance(20 * 60)
        assert "Sign out" in client.get("/").text
    timer.advance(20 * 60)  # 8 h after sign-in
    response = client.post("/actions/redrive", data={"limit": "1", "csrf": csrf})
    assert response.status_code == 401
    assert provider.queue().dlq_depth() == 1


def test_sign_out_ends_the_session(actions_app: Any, provider: Any) -> None:
    client = TestClient(actions_app)
    csrf = _sign_in(client)
    cookie = client.cookies.get("cw_session")
    assert cookie
    assert client.post("/logout", data={}).status_code == 403  # no CSRF: still signed in
    assert "Sign out" in client.get("/").text
    out = client.post("/logout", data={"csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/?done=signed-out"
    assert 'cw_session=""' in out.headers["set-cookie"] or "max-age=0" in (
        out.headers["set-cookie"].lower()
    )
    # the old cookie, presented again, is no session any more
    replay = TestClient(actions_app, cookies={"cw_session": cookie})
    response = replay.post("/actions/redrive", data={"limit": "1", "csrf": csrf})
    assert response.status_code == 401
    assert provider.queue().dlq_depth() == 1
    assert "Signed out." in TestClient(actions_app).get("/?done=signed-out").text


# -- sign-in rate limit ---------------------------------------------------------------------
def test_failed_sign_ins_are_rate_limited_per_client(timed_app: Any, timer: Timer) -> None:
    client = TestClient(timed_app, client=("10.0.0.1", 40000))
    for _ in range(5):
        assert client.post("/login", data={"token": "wrong-token-000000"}).status_code == 401
        timer.advance(10)
    limited = client.post("/login", data={"token": TOKEN}, follow_redirects=False)
    assert limited.status_code == 429  # the right token too, while limited
    wait = int(limited.headers["retry-after"])
    assert 0 < wait <= 300
    assert f"try again in {wait} second(s)" in limited.text
    # another client is not limited
    other = TestClient(timed_app, client=("10.0.0.2", 40000))
    assert other.post("/login", data={"token": TOKEN}, follow_redirects=False).status_code == 303
    timer.advance(wait - 1)
    assert client.post("/login", data={"token": TOKEN}).status_code == 429
    timer.advance(1)
    assert client.post("/login", data={"token": TOKEN}, follow_redirects=False).status_code == 303


# -- 401 and 403 ----------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "body"), API_ACTIONS, ids=lambda v: str(v))
def test_api_actions_answer_401_without_credentials(
    actions_app: Any, app: Any, provider: Any, url: str, body: dict[str, Any]
) -> None:
    before = _state(provider)
    client = TestClient(actions_app)
    for headers in (
        {},
        {"authorization": "Bearer wrong-token-0000000000"},
        {"authorization": TOKEN},  # no scheme
        {"authorization": f"Basic {TOKEN}"},
    ):
        response = client.post(url, json=body, headers=headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "error" in response.json()
    # actions off: no credentials can allow it
    assert TestClient(app).post(url, json=body, headers=AUTH).status_code == 403
    assert _state(provider) == before


@pytest.mark.parametrize(("url", "form"), FORM_ACTIONS, ids=lambda v: str(v))
def test_form_actions_answer_401_then_403(
    actions_app: Any, app: Any, provider: Any, url: str, form: dict[str, str]
) -> None:
    before = _state(provider)
    client = TestClient(actions_app, base_url="http://dash.test")
    assert client.post(url, data=form).status_code == 401  # no session
    client.cookies.set("cw_session", "made-up-session-id")
    assert client.post(url, data=form).status_code == 401  # a session that does not exist
    client.cookies.clear()
    csrf = _sign_in(client)
    assert client.post(url, data=form).status_code == 403  # signed in, no CSRF token
    assert client.post(url, data={**form, "csrf": "0" * 64}).status_code == 403
    for headers in (
        {"origin": "http://evil.test"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
    ):
        crossed = client.post(url, data={**form, "csrf": csrf}, headers=headers)
        assert crossed.status_code == 403, headers
    assert TestClient(app).post(url, data=form).status_code == 403  # actions off
    assert _state(provider) == before
    done = client.post(url, data={**form, "csrf": csrf}, headers={"sec-fetch-site": "same-origin"})
    assert done.status_code == 200, done.text  # followed the 303 to the page


def test_sign_in_from_another_site_is_refused(actions_app: Any) -> None:
    client = TestClient(actions_app, base_url="http://dash.test")
    cross = client.post("/login", data={"token": TOKEN}, headers={"origin": "http://evil.test"})
    assert cross.status_code == 403 and "cw_session" not in cross.headers.get("set-cookie", "")


# -- security headers -----------------------------------------------------------------------
def test_every_response_carries_the_security_headers(actions_app: Any) -> None:
    client = TestClient(actions_app)
    letter = client.get("/api/dead-letters").json()["letters"][0]["message_id"]
    responses = [
        client.get(url)
        for url in (
            "/",
            "/jobs/healthy",
            f"/jobs/healthy/runs/{WINDOW}",
            "/dead-letters",
            f"/dead-letters/{letter}",
            "/login",
            "/api/overview",
            "/api/openapi.json",
            "/static/style.css",
            "/static/app.js",
            "/nowhere",
            "/api/nowhere",
            "/jobs/nope",
        )
    ]
    responses += [
        client.post("/api/actions/pause", json={}),
        client.post("/login", data={"token": "wrong-token-000000"}),
        TestClient(actions_app, base_url="http://evil.example").get("/"),
    ]
    for response in responses:
        url, headers = response.request.url, response.headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "style-src 'self'" in csp, url
        assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp, url
        assert headers["x-frame-options"] == "DENY", url
        assert headers["referrer-policy"] == "no-referrer", url
        assert headers["x-content-type-options"] == "nosniff", url


def test_pages_have_no_inline_script_or_style(actions_app: Any) -> None:
    client = TestClient(actions_app)
    _sign_in(client)  # the signed-in pages carry the action forms
    for url in (
        "/",
        "/jobs/healthy",
        f"/jobs/failing/runs/{WINDOW}",
        f"/jobs/dead/runs/{WINDOW}",
        "/dead-letters",
        "/login",
        "/jobs/nope",
    ):
        html = client.get(url).text
        assert re.findall(r"<script\b[^>]*>", html) == ['<script src="/static/app.js" defer>'], url
        assert not re.search(r"<style\b|\sstyle=|\son[a-z]+=|javascript:", html, re.I), url


# -- banners --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "banner"),
    [
        ("/jobs/healthy?done=paused", "Paused: its scheduled windows are excused"),
        ("/dead-letters?done=redriven&moved=3", "Redrove 3 message(s)."),
        ("/?done=signed-out", "Signed out."),
        ("/jobs/healthy?done=<b>pwned</b>", None),
        ("/jobs/healthy?done=Your+account+is+locked,+call+555-0100", None),
        ("/dead-letters?done=redriven&moved=lots", None),
        ("/dead-letters?done=redriven&moved=99999", None),
        ("/dead-letters?done=redriven", None),
        ("/dead-letters?redriven=<i>x</i>", None),
    ],
)
def test_the_banner_shows_only_known_messages(app: Any, url: str, banner: str | None) -> None:
    html = TestClient(app).get(url).text
    shown = re.findall(r'<p role="status"[^>]*>([^<]*)</p>', html)
    if banner is None:
        assert shown == [] and "pwned" not in html and "555-0100" not in html
    else:
        assert len(shown) == 1 and shown[0].startswith(banner), shown


def test_a_form_action_lands_on_its_banner(actions_app: Any) -> None:
    client = TestClient(actions_app)
    csrf = _sign_in(client)
    done = client.post("/actions/pause", data={"job": "healthy", "reason": "x", "csrf": csrf})
    assert done.url.query == b"done=paused" and "Paused:" in done.text
    done = client.post("/actions/resume", data={"job": "never", "csrf": csrf})
    assert "The job was not paused" in done.text


# -- the document and the behaviour ---------------------------------------------------------
def test_redrive_requires_its_limit(actions_app: Any, provider: Any) -> None:
    client = TestClient(actions_app)
    for body in ({}, {"limit": None}, {"limit": "1"}, {"limit": 1.0}, {"limit": True}):
        response = client.post("/api/actions/redrive", json=body, headers=AUTH)
        assert response.status_code == 400, body
        assert "limit" in response.json()["error"]
    assert provider.queue().dlq_depth() == 1
    document = client.get("/api/openapi.json").json()
    body = document["paths"]["/api/actions/redrive"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["required"] == ["limit"]


def test_documented_statuses_are_the_ones_returned(actions_app: Any) -> None:
    client = TestClient(actions_app)
    paths = client.get("/api/openapi.json").json()["paths"]
    for url, _ in API_ACTIONS:
        responses = paths[url]["post"]["responses"]
        assert {"200", "400", "401", "403"} <= set(responses), url
        assert "WWW-Authenticate" in responses["401"]["headers"]
    for url, status in (
        ("/api/overview?state=", 400),  # the API has no empty state: the document's enum
        ("/api/overview?limit=", 400),
        ("/api/overview?limit=%2B5", 400),
        ("/api/overview?limit=0", 400),
        ("/api/dead-letters?limit=1001", 400),
        ("/api/jobs/a%2Fb/timeline", 404),
    ):
        response = client.get(url)
        assert response.status_code == status, url
        assert response.headers["content-type"] == "application/json", url
        assert (
            str(status) in paths[url.split("?")[0].replace("a%2Fb", "{job}")]["get"]["responses"]
        ), url
    wrong = client.get("/api/actions/pause")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    # the pages' filter form sends empty values for "any"
    assert TestClient(actions_app).get("/?owner=&tag=&state=&limit=").status_code == 200
