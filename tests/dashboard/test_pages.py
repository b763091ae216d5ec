"""The overview in pages: a page size, links between the pages, and problem jobs first, so a
failing or dead-lettered job is never behind a page of healthy ones (issue #29)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from cronwarden import JobSet, job
from cronwarden.adapters.local import LocalProvider
from cronwarden.dashboard import create_app

from . import seed
from .conftest import HOSTS

#: the seeded jobs that are problems (alerting; "dead" has a letter in the dead-letter queue)
PROBLEMS = {"healthy", "failing", "dead", "suspicious"}
QUIET = 250  #: jobs without a run yet, declared before the seeded ones


def _noop(ctx: Any) -> None:
    return None


@pytest.fixture
def crowded(provider: LocalProvider) -> Any:
    """The seeded store with 250 quiet jobs declared ahead of the seeded ones: in definition
    order, every problem job would be on page 3."""
    quiet = [
        job(f"quiet-{i:03d}", cron="0 * * * *", max_runtime="10m")(_noop) for i in range(QUIET)
    ]
    jobs = JobSet([*quiet, *seed.jobs()])
    return create_app(
        jobs, provider.store(), provider.queue(), clock=lambda: seed.NOW, allowed_hosts=HOSTS
    )


def _walk(client: TestClient, url: str) -> list[dict[str, Any]]:
    """Every page from ``url`` on, following the ``next`` links."""
    pages = []
    while url:
        data = client.get(url).json()
        pages.append(data)
        url = "/api/overview" + data["links"]["next"] if data["links"]["next"] else ""
    return pages


def test_pages_follow_each_other_and_cover_every_job_once(app: Any) -> None:
    client = TestClient(app)
    pages = _walk(client, "/api/overview?limit=2")
    assert [p["page"] for p in pages] == [1, 2, 3, 4]
    assert {p["pages"] for p in pages} == {4} and {p["page_size"] for p in pages} == {2}
    names = [j["name"] for p in pages for j in p["jobs"]]
    assert sorted(names) == sorted(j.name for j in seed.jobs())  # each job once
    assert [p["first_row"] for p in pages] == [1, 3, 5, 7]
    assert pages[0]["links"]["prev"] is None and pages[-1]["links"]["next"] is None
    assert pages[1]["links"]["prev"] == "?limit=2&page=1"
    # problems first, then the others in definition order
    assert set(names[: len(PROBLEMS)]) == PROBLEMS
    assert names[len(PROBLEMS) :] == ["running", "paused", "never"]
    assert {p["problem_jobs"] for p in pages} == {len(PROBLEMS)}


def test_links_keep_the_filters(app: Any) -> None:
    data = TestClient(app).get("/api/overview?owner=team-ops&limit=1").json()
    assert data["matching_jobs"] == 3 and data["pages"] == 3
    assert data["links"]["next"] == "?owner=team-ops&limit=1&page=2"
    assert [j["name"] for j in data["jobs"]] == ["dead"]  # a problem: first


def test_problem_jobs_are_on_the_first_page_whatever_their_place(crowded: Any) -> None:
    client = TestClient(crowded)
    data = client.get("/api/overview").json()
    assert data["total_jobs"] == QUIET + 7 and data["page_size"] == 100 and data["pages"] == 3
    assert data["problem_jobs"] == len(PROBLEMS)
    assert {j["name"] for j in data["jobs"][: len(PROBLEMS)]} == PROBLEMS
    assert data["jobs"][len(PROBLEMS)]["name"] == "quiet-000"
    assert len(data["jobs"]) == 100
    assert data["states"]["pending"] == QUIET + 1  # the counts cover every job, not the page
    last = client.get("/api/overview?page=3").json()
    assert [j["name"] for j in last["jobs"]][-3:] == ["running", "paused", "never"]
    assert not PROBLEMS & {j["name"] for j in last["jobs"]}


def test_the_page_names_the_problems_and_links_the_pages(crowded: Any) -> None:
    client = TestClient(crowded)
    first = client.get("/").text
    assert "4 problem job(s)" in first
    assert "Jobs 1\u2013100 of 257" in first and "page 1 of 3" in first
    assert 'href="?page=2" rel="next"' in first and 'rel="prev"' not in first
    assert first.index('id="job-failing"') < first.index('id="job-quiet-000"')
    third = client.get("/?page=3").text
    assert 'id="job-failing"' not in third
    assert "4 problem job(s)</strong>" in third and 'href="?page=1">from page 1' in third
    assert 'href="?page=2" rel="prev"' in third and 'rel="next"' not in third


@pytest.mark.parametrize(
    ("query", "status"), [("page=0", 400), ("page=x", 400), ("page=-1", 400), ("page=99", 200)]
)
def test_page_numbers_are_checked(app: Any, query: str, status: int) -> None:
    response = TestClient(app).get(f"/api/overview?{query}")
    assert response.status_code == status, response.text
    if status == 200:  # past the last page: empty, and its links lead back
        data = response.json()
        assert data["jobs"] == [] and data["first_row"] == 0
        assert data["links"]["prev"] == "?page=1" and data["links"]["next"] is None


def test_a_job_paused_with_cronwarden_pause_shows_as_paused(
    app: Any, provider: LocalProvider
) -> None:
    """``cronwarden pause`` writes the status's ``pause`` field: the overview shows the job
    paused (its state, its row's flag and the state filter), and no longer once resumed."""
    from cronwarden.jobs.pause import pause, resume

    client = TestClient(app)
    name = "never"  # no run yet
    pause(provider.store(), name, by="ops", reason="maintenance", now=seed.NOW)
    rows = {j["name"]: j for j in client.get("/api/overview").json()["jobs"]}
    assert rows[name]["state"] == "paused" and rows[name]["paused"] is True
    filtered = client.get("/api/overview?state=paused").json()["jobs"]
    assert name in [j["name"] for j in filtered]
    resume(provider.store(), name, by="ops", now=seed.NOW)
    rows = {j["name"]: j for j in client.get("/api/overview").json()["jobs"]}
    assert rows[name]["state"] != "paused" and rows[name]["paused"] is False
