"""The OpenAPI schema: it validates, its docs are served locally, and a bounded schemathesis run
over every v1 operation, as a team lead and as a fleet admin, finds no server error and no
response that breaks the schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.validation import validate_schema
from hypothesis import HealthCheck, Phase, given, settings
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from api.services import api_token_create
from tests.api.conftest import People

# Enough to reach every operation with valid and invalid input in the test suite; `make fuzz` (in
# CI after the tests) runs every schemathesis phase over a real server for longer.
EXAMPLES_PER_OPERATION = 4


def test_the_schema_is_valid_openapi_3_and_covers_every_v1_resource(people: People) -> None:
    response = people.client("member").get("/api/v1/schema/?format=json")

    schema = response.json()
    validate_schema(schema)
    paths = set(schema["paths"])
    assert {"/api/v1/jobs/", "/api/v1/jobs/{id}/cancel/", "/api/v1/quota-requests/{id}/approve/"} <= paths
    assert {"/api/v1/teams/{slug}/quotas/", "/api/v1/nodes/{name}/drain/", "/api/v1/reports/usage/"} <= paths
    assert not any(path.startswith("/api/jobs") for path in paths)
    assert schema["x-websocket"]["version"] == 1
    assert "WsJobsEvent" in schema["components"]["schemas"]
    submit = schema["paths"]["/api/v1/jobs/"]["post"]
    assert {"201", "400", "401", "429"} <= set(submit["responses"])


def test_each_create_links_to_what_it_made_and_its_actions(people: People) -> None:
    schema = people.client("member").get("/api/v1/schema/?format=json").json()
    operations = {
        operation["operationId"]: (method, path)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    }

    def links(path: str) -> dict[str, dict[str, str]]:
        found = schema["paths"][path]["post"]["responses"]["201"]["links"]
        return {name: link["parameters"] for name, link in found.items()}

    assert links("/api/v1/jobs/") == {
        "jobs_retrieve": {"id": "$response.body#/id"},
        "jobs_cancel_create": {"id": "$response.body#/id"},
        "jobs_events_list": {"id": "$response.body#/id"},
    }
    assert set(links("/api/v1/quota-requests/")) == {
        "quota_requests_retrieve",
        "quota_requests_approve_create",
        "quota_requests_reject_create",
        "quota_requests_withdraw_create",
    }
    assert links("/api/v1/teams/{slug}/members/")["teams_members_destroy"] == {
        "slug": "$request.path.slug",
        "username": "$response.body#/username",
    }
    assert set(links("/api/v1/simulations/")) == {"simulations_retrieve", "simulations_cancel_create"}
    assert set(links("/api/v1/priority-classes/")) == {
        "priority_classes_retrieve",
        "priority_classes_partial_update",
    }
    for path in ("/api/v1/jobs/", "/api/v1/quota-requests/", "/api/v1/simulations/"):
        assert all(operations[name][1].startswith(path + "{id}/") for name in links(path))


def test_following_a_creates_link_reaches_what_it_made(people: People) -> None:
    client = people.client("lead")
    made = client.post(
        "/api/v1/quota-requests/",
        {"team": people.fleet.team.slug, "accelerator": "H100", "guaranteed": 4, "justification": "more runs"},
        format="json",
    )

    withdrawn = client.post(f"/api/v1/quota-requests/{made.json()['id']}/withdraw/")

    assert made.status_code == 201
    assert withdrawn.status_code == 200, withdrawn.content
    assert withdrawn.json()["state"] == "withdrawn"


def test_swagger_ui_and_redoc_are_served_without_a_cdn(people: People) -> None:
    client = APIClient()
    for path in ("/api/v1/docs/", "/api/v1/redoc/"):
        page = client.get(path).content.decode()
        assert "drf_spectacular_sidecar" in page
        assert "cdn" not in page.lower()


@pytest.fixture
def wsgi_app(people: People) -> Iterator[Any]:
    """Django as a plain WSGI app inside the test's transaction: like Django's test client, do not
    close the connection (and so the transaction) at each request's end."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(wsgi_app: Any) -> Any:
    return schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", wsgi_app)


@pytest.fixture
def tokens(people: People) -> dict[str, str]:
    return {who: api_token_create(user=getattr(people, who), name="fuzz").secret for who in ("lead", "admin")}


def test_no_request_makes_a_server_error_or_a_response_outside_the_schema(
    api_schema: Any, tokens: dict[str, str]
) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 30
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            phases=[Phase.explicit, Phase.generate],
        )
        def call(case: Any) -> None:
            for token in tokens.values():
                case.call_and_validate(
                    headers={"Authorization": f"Bearer {token}"},
                    checks=[not_a_server_error, response_schema_conformance],
                )

        call()
