"""The resolve, rerun, pause and resume actions: token-gated (401 without it, 403 when actions
are off), CSRF-protected forms, and recorded through the same functions as their CLI twins."""

from __future__ import annotations

import logging
import re
import warnings
from datetime import timedelta
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from cronwarden.jobs.pause import pause_of
from cronwarden.model.records import RunRecord, run_key_of, status_key_of

from . import seed
from .conftest import TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
DEAD = {"job": "dead", "window": "2026-01-20T12:00Z", "reason": "row fixed by hand"}


def _run(provider: Any, job: str, window: str) -> RunRecord:
    record = provider.store().get(run_key_of(job, window))
    assert record is not None
    return RunRecord.from_data(record.data)


@pytest.mark.parametrize("action", ["resolve", "rerun", "pause", "resume"])
def test_actions_are_refused_without_the_token(
    app: Any, actions_app: Any, provider: Any, action: str
) -> None:
    body = {**DEAD, "job": "healthy"} if action in ("pause", "resume") else DEAD
    url = f"/api/actions/{action}"
    # actions disabled: refused even with the right token
    assert TestClient(app).post(url, json=body, headers=AUTH).status_code == 403
    client = TestClient(actions_app)
    for headers in (
        {},
        {"authorization": "Bearer wrong-token-0000000000"},
        {"authorization": TOKEN},
    ):
        assert client.post(url, json=body, headers=headers).status_code == 401
    assert _run(provider, "dead", "2026-01-20T12:00Z").state.value == "dead_lettered"
    status = provider.store().get(status_key_of("healthy"))
    assert pause_of(status.data if status else {}) is None


def test_api_resolve_records_who_and_why(
    actions_app: Any, provider: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client = TestClient(actions_app)
    with caplog.at_level(logging.INFO):
        response = client.post("/api/actions/resolve", json=DEAD, headers=AUTH)
    assert response.status_code == 200, response.text
    run = _run(provider, "dead", "2026-01-20T12:00Z")
    assert run.state.value == "excused" and run.excused == "resolved"
    # its dead letter is gone too: a redrive of it could only be acknowledged unrun
    assert "removed 1 dead letter(s)" in response.json()["text"]
    assert provider.queue().dlq_depth() == 0
    assert "row fixed by hand (by dashboard:api" in (run.excused_detail or "")
    assert any(getattr(r, "event", None) == "window.resolved" for r in caplog.records)
    # a second resolve is refused: the window is settled now
    again = client.post("/api/actions/resolve", json=DEAD, headers=AUTH)
    assert again.status_code == 400 and "nothing to resolve" in again.json()["error"]
    missing = client.post("/api/actions/resolve", json={**DEAD, "reason": " "}, headers=AUTH)
    assert missing.status_code == 400


def test_api_rerun_enqueues_a_new_generation(actions_app: Any, provider: Any) -> None:
    client = TestClient(actions_app)
    body = {"job": "healthy", "window": "2026-01-20T12:00Z"}
    response = client.post("/api/actions/rerun", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    assert "re-run generation 1 (was succeeded)" in response.json()["text"]
    message = provider.queue().receive(10)
    assert any(m.attributes.get("run_key") == "healthy:2026-01-20T12:00Z" for m in message)


def test_api_pause_and_resume(actions_app: Any, provider: Any) -> None:
    client = TestClient(actions_app)
    paused = client.post(
        "/api/actions/pause", json={"job": "healthy", "reason": "upstream outage"}, headers=AUTH
    )
    assert paused.status_code == 200, paused.text
    status = provider.store().get(status_key_of("healthy"))
    assert status is not None
    view = pause_of(status.data)
    assert view is not None and view.by == "dashboard:api" and view.reason == "upstream outage"
    assert (
        client.post("/api/actions/pause", json={"job": "healthy"}, headers=AUTH).status_code == 400
    )
    resumed = client.post("/api/actions/resume", json={"job": "healthy"}, headers=AUTH)
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    status = provider.store().get(status_key_of("healthy"))
    assert status is not None and pause_of(status.data) is None
    assert [e["action"] for e in status.data["pause_log"]][-2:] == ["pause", "resume"]
    assert (
        client.post(
            "/api/actions/pause", json={"job": "nope", "reason": "x"}, headers=AUTH
        ).status_code
        == 404
    )


def test_api_pause_never_replaces_a_pause_unasked_and_refuses_unknown_fields(
    actions_app: Any, provider: Any
) -> None:
    client = TestClient(actions_app)
    first = {"job": "healthy", "reason": "do not run until I say"}
    assert client.post("/api/actions/pause", json=first, headers=AUTH).status_code == 200
    end = (seed.NOW + timedelta(days=30)).strftime("%Y-%m-%dT%H:%MZ")
    second = {"job": "healthy", "reason": "short", "until": end}
    refused = client.post("/api/actions/pause", json=second, headers=AUTH)
    assert refused.status_code == 400 and "already paused" in refused.json()["error"]
    status = provider.store().get(status_key_of("healthy"))
    view = pause_of(status.data if status else {})
    assert view is not None and view.reason == "do not run until I say" and view.until is None
    typo = client.post(
        "/api/actions/pause", json={**second, "replace": True, "untill": "x"}, headers=AUTH
    )
    assert typo.status_code == 400 and "unknown field(s): untill" in typo.json()["error"]
    replaced = client.post("/api/actions/pause", json={**second, "replace": True}, headers=AUTH)
    assert replaced.status_code == 200, replaced.text
    status = provider.store().get(status_key_of("healthy"))
    view = pause_of(status.data if status else {})
    assert view is not None and view.reason == "short"
    assert view.until == seed.NOW.replace(second=0, microsecond=0) + timedelta(days=30)
    bad_end = client.post(
        "/api/actions/pause", json={**second, "replace": True, "until": "soon"}, headers=AUTH
    )
    assert bad_end.status_code == 400 and "until" in bad_end.json()["error"]


def test_form_actions_need_session_and_csrf(actions_app: Any, provider: Any) -> None:
    client = TestClient(actions_app, base_url="http://dash.test")
    form = {"job": "healthy", "reason": "maintenance"}
    assert client.post("/actions/pause", data=form).status_code == 401  # no session
    client.post("/login", data={"token": TOKEN}, follow_redirects=False)
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/jobs/healthy").text)
    assert match, "no CSRF field on the job page"
    csrf = match.group(1)
    assert client.post("/actions/pause", data=form).status_code == 403  # no CSRF
    cross = client.post(
        "/actions/pause", data={**form, "csrf": csrf}, headers={"origin": "http://evil.test"}
    )
    assert cross.status_code == 403
    status = provider.store().get(status_key_of("healthy"))
    assert pause_of(status.data if status else {}) is None
    done = client.post("/actions/pause", data={**form, "csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].startswith("/jobs/healthy")
    status = provider.store().get(status_key_of("healthy"))
    assert status is not None
    view = pause_of(status.data)
    assert view is not None and view.by == "dashboard:form"
