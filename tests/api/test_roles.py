"""Every read endpoint of /api/v1/ as the team's lead, a member, an outsider (another team's
lead), finance and a fleet admin, and anonymously: the table states who gets what."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from scheduling.fleet_calendar import fleet_today
from tests.api.conftest import People
from tests.factories import QuotaRequestFactory

WHO = ("lead", "member", "outsider", "finance", "admin")
TEAM_ONLY = (200, 200, 404, 404, 200)
EVERYONE = (200, 200, 200, 200, 200)

# path (with {job}, {request} and {today} filled in) -> status for each of WHO
READS = {
    "/api/v1/jobs/": EVERYONE,
    "/api/v1/jobs/{job}/": TEAM_ONLY,
    "/api/v1/jobs/{job}/events/": TEAM_ONLY,
    "/api/v1/teams/": EVERYONE,
    "/api/v1/teams/language-models/": TEAM_ONLY,
    "/api/v1/teams/language-models/quotas/": TEAM_ONLY,
    "/api/v1/teams/language-models/members/": TEAM_ONLY,
    "/api/v1/quota-requests/": EVERYONE,
    "/api/v1/quota-requests/{request}/": TEAM_ONLY,
    "/api/v1/priority-classes/": EVERYONE,
    "/api/v1/priority-classes/training/": EVERYONE,
    "/api/v1/policy/": EVERYONE,
    "/api/v1/fleet/": EVERYONE,
    "/api/v1/clock/": EVERYONE,
    "/api/v1/accelerators/": EVERYONE,
    "/api/v1/nodes/": EVERYONE,
    "/api/v1/nodes/pod-a-r1-n1/": EVERYONE,
    "/api/v1/incidents/": EVERYONE,
    # finance and fleet admins every team, leads their own teams (the outsider leads another)
    "/api/v1/reports/usage/?start={today}&end={today}": (200, 404, 200, 200, 200),
}


def _fill(path: str, people: People) -> str:
    job = people.fleet.submit(gpus=8)
    request = QuotaRequestFactory(team=people.fleet.team, accelerator_type=people.fleet.accelerator)
    return path.format(job=job.pk, request=request.pk, today=fleet_today().isoformat())


@pytest.mark.parametrize(("path", "statuses"), READS.items(), ids=list(READS))
def test_each_read_answers_each_role_as_the_pages_do(people: People, path: str, statuses: tuple[int, ...]) -> None:
    url = _fill(path, people)

    answered = tuple(people.client(who).get(url).status_code for who in WHO)

    assert answered == statuses


@pytest.mark.parametrize("path", list(READS))
def test_every_endpoint_answers_an_anonymous_call_with_401_and_a_bearer_challenge(people: People, path: str) -> None:
    response = APIClient().get(_fill(path, people))

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"


WRITES = {
    "/api/v1/quota-requests/{request}/approve/": ({}, (403, 403, 404, 404, 200)),
    "/api/v1/quota-requests/{request}/reject/": ({"note": "No."}, (403, 403, 404, 404, 200)),
    "/api/v1/quota-requests/{request}/withdraw/": ({}, (200, 403, 404, 404, 403)),
    "/api/v1/jobs/{job}/cancel/": ({}, (200, 200, 404, 404, 200)),
    "/api/v1/teams/language-models/members/": ({"username": "finance"}, (201, 403, 404, 404, 201)),
    "/api/v1/nodes/pod-a-r1-n1/cordon/": ({}, (403, 403, 403, 403, 200)),
    "/api/v1/priority-classes/": (
        {"name": "x", "value": 1, "kind": "batch", "preemptible": True, "may_preempt": False},
        (403, 403, 403, 403, 201),
    ),
}


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("path", list(WRITES))
def test_each_write_answers_each_role(people: People, path: str, who: str) -> None:
    body, statuses = WRITES[path]

    response = people.client(who).post(_fill(path, people), body, format="json")

    assert response.status_code == statuses[WHO.index(who)]
