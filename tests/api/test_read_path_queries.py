"""The pages and the API call that list jobs read them lean: each costs the same number of
queries with 5 jobs as with 200, whoever asks (a member sees their team's jobs, a fleet admin
everyone's), and shows the jobs it is asked for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from scheduling.models import Job
from tests.api.conftest import People

pytestmark = pytest.mark.django_db

SMALL, LARGE = 5, 200


def _jobs(people: People, count: int) -> None:
    """``count`` jobs in all, of three sizes, more than the fleet holds: the first ticks' starts
    run, the rest wait with their reasons stored; some submitted by the member."""
    fleet = people.fleet
    for i in range(Job.objects.count(), count):
        fleet.submit(gpus=(8, 16, 4)[i % 3], name=f"job-{i}", time_limit_s=7200.0)
    Job.objects.filter(name__endswith="0").update(submitted_by=people.member)
    fleet.tick()


def _queries(call: Callable[[], Any]) -> int:
    call()  # anything cached per process (the waits document, the calibration) is read once
    with CaptureQueriesContext(connection) as queries:
        call()
    return len(queries)


def _page(people: People, who: str, path: str) -> Callable[[], Any]:
    client = Client()
    client.force_login(getattr(people, who))

    def get() -> Any:
        response = client.get(path, secure=True)
        assert response.status_code == 200
        return response

    return get


def _api(people: People, who: str, path: str) -> Callable[[], Any]:
    client = people.client(who)

    def get() -> Any:
        response = client.get(path)
        assert response.status_code == 200
        return response

    return get


@pytest.mark.parametrize("who", ["member", "admin"])
@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("dashboard", lambda people, who: _page(people, who, "/")),
        ("jobs page", lambda people, who: _page(people, who, "/jobs/?show=all")),
        ("jobs page sorted by team", lambda people, who: _page(people, who, "/jobs/?show=all&sort=team")),
        ("jobs page rows", lambda people, who: _page(people, who, "/jobs/?part=rows")),
        ("team page", lambda people, who: _page(people, "lead" if who == "member" else who, "/teams/fleet-team/")),
        ("API job list", lambda people, who: _api(people, who, "/api/v1/jobs/?page_size=500")),
    ],
)
def test_each_list_costs_the_same_queries_whatever_the_number_of_jobs(
    people: People, name: str, make: Callable[[People, str], Callable[[], Any]], who: str
) -> None:
    people.fleet.team.slug = "fleet-team"
    people.fleet.team.save()
    call = make(people, who)
    _jobs(people, SMALL)
    small = _queries(call)
    _jobs(people, LARGE)
    large = _queries(call)

    assert large == small, f"{name}: {small} queries with {SMALL} jobs, {large} with {LARGE}"


def test_the_lean_lists_show_every_job_asked_for(people: People) -> None:
    _jobs(people, 60)
    listed = _api(people, "member", "/api/v1/jobs/?page_size=500")().json()["results"]
    assert len(listed) == 60
    assert {job["state"] for job in listed} >= {"running", "pending"}
    assert any(job["pending"] for job in listed)
    page = _page(people, "member", "/jobs/?show=all")().content.decode()
    assert page.count('<tr id="job-') == 50  # a page of the list
    assert 'href="/jobs/' in page and "job-59" in page


def test_the_jobs_page_before_the_first_tick_costs_the_same_queries_whatever_the_number_of_jobs(
    people: People,
) -> None:
    """Before a tick has fixed the fleet epoch, each time on the page is shown on a calendar that
    starts now: worked out once, not asked of the database for every row."""
    call = _page(people, "admin", "/jobs/?show=all")
    for i in range(SMALL):
        people.fleet.submit(gpus=1, name=f"early-{i}")
    small = _queries(call)
    for i in range(SMALL, 40):
        people.fleet.submit(gpus=1, name=f"early-{i}")
    large = _queries(call)

    assert large == small, f"{small} queries with {SMALL} jobs, {large} with 40"


@pytest.mark.parametrize(
    "path", ["/api/v1/jobs/?page_size=20", "/jobs/?show=all", "/teams/fleet-team/"], ids=["api", "page", "team"]
)
def test_a_page_is_picked_on_the_job_table_alone_and_only_its_rows_are_joined(people: People, path: str) -> None:
    """Joined in the statement that picks the page, the planner may join every job the filter keeps
    before it cuts the page (on a table not yet analysed: thousands of rows for 51)."""
    people.fleet.team.slug = "fleet-team"
    people.fleet.team.save()
    _jobs(people, 60)
    call = _api(people, "member", path) if path.startswith("/api/") else _page(people, "lead", path)
    with CaptureQueriesContext(connection) as queries:
        call()
    jobs = [q["sql"] for q in queries if 'FROM "scheduling_job"' in q["sql"] and "COUNT(" not in q["sql"]]
    picks = [sql for sql in jobs if "LIMIT" in sql]
    assert picks and all('JOIN "tenants_priorityclass"' not in sql for sql in picks), picks
    assert any('JOIN "tenants_priorityclass"' in sql and '"id" IN (' in sql for sql in jobs)
