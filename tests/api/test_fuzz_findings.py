"""What ``make fuzz`` (schemathesis over every v1 operation, against a real server) found, each fed
once: an operation refused to the caller's role answers a 403 the schema documents, and a path
under /api/v1/ with a line break in it is the API's JSON 404, not the site's HTML page."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.api.conftest import People

pytestmark = pytest.mark.django_db


def _refused_to_a_lead(people: People) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, schema path, URL, body) of operations a team's lead may not make."""
    node = people.fleet.nodes[0].name
    team = people.fleet.team.slug
    accelerator = people.fleet.accelerator.name
    return [
        ("delete", "/api/v1/teams/{slug}/members/{username}/", f"/api/v1/teams/{team}/members/lead/", {}),
        (
            "patch",
            "/api/v1/teams/{slug}/members/{username}/",
            f"/api/v1/teams/{team}/members/lead/",
            {"role": "member"},
        ),
        ("patch", "/api/v1/policy/", "/api/v1/policy/", {"backfill": False}),
        ("patch", "/api/v1/priority-classes/{name}/", "/api/v1/priority-classes/training/", {"value": 1}),
        ("post", "/api/v1/priority-classes/", "/api/v1/priority-classes/", {"name": "x", "value": 1, "kind": "batch"}),
        ("post", "/api/v1/nodes/{name}/cordon/", f"/api/v1/nodes/{node}/cordon/", {}),
        ("post", "/api/v1/nodes/{name}/drain/", f"/api/v1/nodes/{node}/drain/", {}),
        ("post", "/api/v1/nodes/{name}/uncordon/", f"/api/v1/nodes/{node}/uncordon/", {}),
        (
            "put",
            "/api/v1/teams/{slug}/quotas/{accelerator}/",
            f"/api/v1/teams/{team}/quotas/{accelerator}/",
            {"guaranteed": 1},
        ),
        ("post", "/api/v1/simulations/", "/api/v1/simulations/", {"source": "history", "team": "vision"}),
    ]


def test_every_operation_refused_to_a_lead_documents_its_403(people: People) -> None:
    schema = people.client("admin").get("/api/v1/schema/?format=json").json()
    lead = people.client("lead")

    for method, schema_path, url, body in _refused_to_a_lead(people):
        response = getattr(lead, method)(url, body, format="json")

        assert response.status_code == 403, (method, url, response.content)
        assert response.json()["type"] == "client_error"
        assert "403" in schema["paths"][schema_path][method]["responses"], (method, schema_path)


def test_every_operation_documents_a_403_since_each_needs_a_signed_in_user(people: People) -> None:
    schema = people.client("admin").get("/api/v1/schema/?format=json").json()

    undocumented = [
        (method, path)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if method in ("get", "post", "put", "patch", "delete") and "403" not in operation["responses"]
    ]

    assert undocumented == []


@pytest.mark.parametrize(
    "path", ["simulations/%C3%83%0Aw/cancel/", "jobs/1%0A/", "quota-requests/%0A1/reject/", "%0A/", "jobs/%0D%0A/"]
)
def test_a_v1_path_with_a_line_break_is_the_apis_json_404(people: People, path: str) -> None:
    for client in (people.client("lead"), APIClient()):
        for method in ("get", "post"):
            response = getattr(client, method)(f"/api/v1/{path}")

            assert response.status_code == 404, (method, path, response.content[:200])
            assert response["Content-Type"] == "application/json"
            assert response.json() == {
                "type": "client_error",
                "errors": [{"code": "not_found", "detail": "Not found.", "attr": None}],
            }
