"""The JSON API and the pages over a store seeded with jobs in every state."""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from . import seed
from .conftest import TOKEN

PAGES = [
    "/",
    "/?owner=team-data",
    "/jobs/healthy",
    "/jobs/failing",
    "/jobs/failing/runs/2026-01-20T12:00Z",
    "/jobs/running/runs/2026-01-20T12:00Z",
    "/dead-letters",
]


def test_overview_shows_every_job_in_its_state(app: Any) -> None:
    data = TestClient(app).get("/api/overview").json()
    states = {j["name"]: j["state"] for j in data["jobs"]}
    assert states == {
        "healthy": "alerting",  # its one lost window is a gap: `missed` ([windows])
        "failing": "alerting",
        "dead": "alerting",  # its dead-lettered window, from the store ([windows])
        "running": "running",
        "paused": "paused",
        "suspicious": "alerting",  # the watcher raises `suspicious` ([ops])
        "never": "pending",
    }
    assert data["dlq_depth"] == 1
    rows = {j["name"]: j for j in data["jobs"]}
    assert {a["kind"] for a in rows["failing"]["alerts"]} == {"missed", "failing"}
    assert rows["dead"]["dead_letters"] == 1
    assert rows["suspicious"]["suspicious"] == ["rows < 100"]
    berlin = rows["healthy"]["last_success_window"]
    assert berlin["utc"] == "2026-01-20T12:00:00Z"
    assert berlin["local"] == "2026-01-20T13:00:00+01:00" and berlin["zone"] == "Europe/Berlin"
    assert rows["healthy"]["owner"] == "team-data" and rows["healthy"]["tags"] == ["billing", "eu"]


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("owner=team-ops", {"dead", "running", "paused"}),
        ("tag=eu", {"healthy", "dead"}),
        ("state=alerting", {"healthy", "failing", "dead", "suspicious"}),
        ("state=running", {"running"}),
        ("owner=team-data&tag=billing", {"healthy", "failing"}),
    ],
)
def test_overview_filters(app: Any, query: str, names: set[str]) -> None:
    data = TestClient(app).get(f"/api/overview?{query}").json()
    assert {j["name"] for j in data["jobs"]} == names
    assert data["total_jobs"] == 7


def test_timeline_has_one_cell_per_due_window(app: Any) -> None:
    data = (
        TestClient(app)
        .get("/api/jobs/healthy/timeline?start=2026-01-19T12:00Z&end=2026-01-20T12:30Z")
        .json()
    )
    windows = {w["window"]: w["state"] for w in data["windows"]}
    assert len(windows) == 25
    assert windows["2026-01-19T17:00Z"] == "gap"
    assert windows["2026-01-19T21:00Z"] == "excused"
    assert windows["2026-01-20T12:00Z"] == "succeeded"
    assert data["counts"]["gap"] == 1 and data["counts"]["succeeded"] == 23
    failing = TestClient(app).get("/api/jobs/failing/timeline").json()
    # the newest failure has its retry due; the older failures were never retried: gaps
    assert [w["state"] for w in failing["windows"]][-4:] == ["gap", "gap", "gap", "failed"]
    assert len(failing["durations"]) == 25


def test_run_detail_of_a_running_window(app: Any) -> None:
    data = TestClient(app).get("/api/jobs/running/runs/2026-01-20T12:00Z").json()
    assert data["state"] == "running" and data["worker"] == "worker-1"
    assert data["ledger"] == {
        "items": 4,
        "done": 2,
        "uncertain": 1,
        "quarantined": 1,
        "released": 0,
    }
    assert data["lock"]["live"] is True
    assert data["last_skip"]["reason"] == "lock_held"


def test_secrets_are_redacted_everywhere(app: Any) -> None:
    client = TestClient(app)
    letter = client.get("/api/dead-letters").json()["letters"][0]
    urls = [
        *PAGES,
        "/api/overview",
        "/api/jobs/failing/runs/2026-01-20T12:00Z",
        "/api/dead-letters",
        f"/dead-letters/{letter['message_id']}",
        f"/api/dead-letters/{letter['message_id']}",
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert seed.SECRET not in response.text, url
    run = client.get("/api/jobs/failing/runs/2026-01-20T12:00Z").json()
    assert "password=***" in run["error"]


def test_pages_name_states_in_text_not_colour_alone(app: Any) -> None:
    client = TestClient(app)
    page = client.get("/jobs/healthy?start=2026-01-19T12:00Z&end=2026-01-20T12:30Z").text
    assert 'aria-label="2026-01-19T17:00Z gap: no run"' in page
    assert 'aria-label="2026-01-19T21:00Z excused (skip or pause)"' in page
    overview = client.get("/").text
    assert ">alerting</span>" in overview and ">paused</span>" in overview
    assert "<script" in overview and "data-autosubmit" in overview  # works without it too


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/jobs/nope/timeline", 404),
        ("/api/jobs/healthy/runs/2026-01-20T12:07Z", 404),
        ("/api/jobs/healthy/runs/yesterday", 400),
        ("/api/jobs/healthy/timeline?start=soon", 400),
        ("/api/jobs/healthy/timeline?start=2026-01-20T00:00Z&end=2026-01-19T00:00Z", 400),
        ("/api/overview?state=weird", 400),
        ("/api/overview?limit=x", 400),
        ("/api/dead-letters/missing", 404),
        ("/jobs/nope", 404),
    ],
)
def test_bad_requests_are_4xx(app: Any, url: str, status: int) -> None:
    assert TestClient(app).get(url).status_code == status


def test_actions_are_off_without_a_token(app: Any) -> None:
    client = TestClient(app)
    response = client.post(
        "/api/actions/redrive", json={"limit": 1}, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 403
    assert client.get("/api/dead-letters").json()["dlq_depth"] == 1
    assert "/api/actions/redrive" not in client.get("/api/openapi.json").json()["paths"]


def test_api_redrive_needs_the_token(actions_app: Any, provider: Any) -> None:
    client = TestClient(actions_app)
    for headers in ({}, {"authorization": "Bearer wrong-token-0000000000"}):
        assert (
            client.post("/api/actions/redrive", json={"limit": 1}, headers=headers).status_code
            == 401
        )
    assert provider.queue().dlq_depth() == 1
    response = client.post(
        "/api/actions/redrive", json={"limit": 1}, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert response.json() == {"redriven": 1}
    assert provider.queue().dlq_depth() == 0


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF field in the form"
    return match.group(1)


def test_form_redrive_needs_session_and_csrf(actions_app: Any, provider: Any) -> None:
    client = TestClient(actions_app, base_url="http://dash.test")
    assert client.post("/actions/redrive", data={"limit": "1"}).status_code == 401
    bad = client.post("/login", data={"token": "not-it"})
    assert bad.status_code == 401
    login = client.post("/login", data={"token": TOKEN}, follow_redirects=False)
    assert login.status_code == 303 and "samesite=strict" in login.headers["set-cookie"].lower()
    csrf = _csrf(client.get("/dead-letters").text)
    assert client.post("/actions/redrive", data={"limit": "1"}).status_code == 403
    assert client.post("/actions/redrive", data={"limit": "1", "csrf": "0" * 64}).status_code == 403
    cross = client.post(
        "/actions/redrive",
        data={"limit": "1", "csrf": csrf},
        headers={"origin": "http://evil.test"},
    )
    assert cross.status_code == 403
    assert provider.queue().dlq_depth() == 1
    done = client.post(
        "/actions/redrive", data={"limit": "1", "csrf": csrf}, follow_redirects=False
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/dead-letters?done=redriven&moved=1"
    assert provider.queue().dlq_depth() == 0


def test_security_headers(app: Any) -> None:
    response = TestClient(app).get("/")
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"


def test_import_cronwarden_does_not_load_the_dashboard() -> None:
    import subprocess
    import sys

    code = (
        "import sys, cronwarden, cronwarden.cli; "
        "bad = [m for m in ('starlette', 'jinja2', 'uvicorn', 'cronwarden.dashboard') "
        "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_overview_baseline_follows_each_new_success(app: Any, provider: Any) -> None:
    """The overview reuses a job's baseline while its last success is unchanged: a new
    success (new slot, new ``last_success_at``) must show at once."""
    from datetime import timedelta

    from cronwarden.model.ports import Merge
    from cronwarden.model.records import iso, status_key_of
    from cronwarden.run.baseline import baseline_fields

    job = seed.jobs().get("healthy")
    assert job is not None
    store, client = provider.store(), TestClient(app)

    def succeed(hours_ago: int, duration_ms: int) -> None:
        window = seed.NOW.replace(minute=0) - timedelta(hours=hours_ago)
        fields = baseline_fields(job, window, duration_ms, seed.NOW)
        fields.update(last_success_at=iso(window + timedelta(minutes=1)), duration_ms=duration_ms)
        store.commit([Merge(status_key_of("healthy"), fields)])

    def baseline() -> Any:
        rows = client.get("/api/overview").json()["jobs"]
        return next(r["baseline"] for r in rows if r["name"] == "healthy")

    for hours_ago in range(5, 0, -1):
        succeed(hours_ago, 1_000)
    assert baseline() == {"p50_ms": 1000, "p95_ms": 1000, "samples": 5}
    assert baseline() == {"p50_ms": 1000, "p95_ms": 1000, "samples": 5}  # served again
    succeed(0, 61_000)
    assert baseline()["samples"] == 6 and baseline()["p95_ms"] > 1000
