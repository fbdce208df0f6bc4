"""The routes before v1 (``/api/jobs/...``) are retired: every method answers 410 Gone in the v1
error format with a link to v1, for anyone; and the "Token" scheme they used is no longer accepted."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from api.services import api_token_create
from api.views.retired import v1_successor
from tests.api.conftest import People, bearer_client, submission

RETIRED = [
    ("/api/jobs/", "/api/v1/jobs/"),
    ("/api/jobs/submit/", "/api/v1/jobs/"),
    ("/api/jobs/42/", "/api/v1/jobs/42/"),
    ("/api/jobs/42/cancel/", "/api/v1/jobs/42/cancel/"),
    ("/api/jobs", "/api/v1/jobs/"),
    ("/api/jobs/anything/else/", "/api/v1/jobs/"),
]


def _assert_gone(response: object, successor: str) -> None:
    assert response.status_code == 410  # type: ignore[attr-defined]
    assert response["Link"] == f'<{successor}>; rel="successor-version"'  # type: ignore[index]
    body = response.json()  # type: ignore[attr-defined]
    assert body["type"] == "client_error"
    assert [error["code"] for error in body["errors"]] == ["gone"]
    assert successor in body["errors"][0]["detail"]
    assert body["errors"][0]["attr"] is None


@pytest.mark.parametrize(("path", "successor"), RETIRED)
@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete", "options"])
def test_every_method_on_an_old_route_answers_gone_with_a_link_to_v1(
    people: People, path: str, successor: str, method: str
) -> None:
    response = getattr(people.client("member"), method)(path)

    _assert_gone(response, successor)


def test_an_old_route_answers_gone_to_anonymous_callers_too(db: None) -> None:
    _assert_gone(APIClient().get("/api/jobs/"), "/api/v1/jobs/")


def test_a_submission_to_the_old_route_makes_no_job(people: People) -> None:
    job = people.fleet.submit(gpus=8)
    client = people.client("member")

    _assert_gone(client.post("/api/jobs/submit/", submission(people.fleet), format="json"), "/api/v1/jobs/")
    _assert_gone(client.post(f"/api/jobs/{job.pk}/cancel/"), f"/api/v1/jobs/{job.pk}/cancel/")

    assert client.get("/api/v1/jobs/").json()["results"][0]["id"] == job.pk
    job.refresh_from_db()
    assert job.state != "cancelled"


@pytest.mark.parametrize(
    ("rest", "successor"),
    [("", "/api/v1/jobs/"), ("7/", "/api/v1/jobs/7/"), ("7/cancel/", "/api/v1/jobs/7/cancel/"), ("7", "/api/v1/jobs/")],
)
def test_each_old_path_names_its_v1_successor(rest: str, successor: str) -> None:
    assert v1_successor(rest) == successor


def test_the_token_scheme_is_not_accepted_on_v1(people: People) -> None:
    secret = api_token_create(user=people.member, name="script").secret
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")

    response = client.get("/api/v1/jobs/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert bearer_client(people.member).get("/api/v1/jobs/").status_code == 200
