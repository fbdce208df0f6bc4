"""Ordinary bad input, each fed once: a forged cursor, a lone surrogate, a year past the reports'
last day, an oversized CSV field, Unicode digits, OPTIONS, an empty multipart body, loose numbers,
an unknown accelerator, a blank idempotency key and an unknown path. Each is answered 4xx: in the
API's error shape on /api/v1/, a form error on the pages."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from api import cli
from api.services import api_token_create
from finance.forms import BudgetForm
from scheduling.models import Job
from simulations.forms import SimulationForm
from tenants.forms import QuotaRequestForm
from tenants.models import Notification, QuotaRequest
from tests.api.conftest import People, submission
from tests.factories import QuotaRequestFactory

pytestmark = pytest.mark.django_db


def assert_error_shape(response: Any, status: int, *, code: str | None = None, attr: str | None = None) -> None:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["type"] in ("validation_error", "client_error"), body
    assert body["errors"] and all(set(error) == {"code", "detail", "attr"} for error in body["errors"]), body
    if code is not None:
        assert code in [error["code"] for error in body["errors"]], body
    if attr is not None:
        assert attr in [error["attr"] for error in body["errors"]], body


def _cursor(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# Cursors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("resource", ["jobs", "incidents", "quota-requests", "simulations", "nodes"])
@pytest.mark.parametrize("position", ["p=x", "p=nan", "p=1e308", "p=99999999999999999999999", "p=²"])
def test_a_forged_cursor_is_a_400_on_every_list(people: People, resource: str, position: str) -> None:
    response = people.client("admin").get(f"/api/v1/{resource}/", {"cursor": _cursor(position)})

    assert_error_shape(response, 400, code="invalid_cursor", attr="cursor")


def test_a_cursor_that_is_not_base64_is_a_400_too(people: People) -> None:
    response = people.client("lead").get("/api/v1/jobs/", {"cursor": "abc"})

    assert_error_shape(response, 400, code="invalid_cursor", attr="cursor")


def test_a_cursor_the_api_made_still_pages(people: People) -> None:
    for _ in range(3):
        people.fleet.submit(gpus=8)
    client = people.client("lead")

    first = client.get("/api/v1/jobs/", {"page_size": 2}).json()
    second = client.get(first["next"]).json()

    assert len(first["results"]) + len(second["results"]) == 3


# Bodies ------------------------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_json_body_is_a_parse_error(people: People) -> None:
    body = json.dumps(submission(people.fleet, kind="\ud800"))  # escaped as \ud800 by json.dumps

    response = people.client("lead").post("/api/v1/jobs/", body, content_type="application/json")

    assert_error_shape(response, 400, code="parse_error")
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "path", ["/api/v1/quota-requests/", "/api/v1/simulations/", "/api/v1/quota-requests/{id}/reject/"]
)
def test_an_empty_multipart_body_is_answered_in_the_error_shape(people: People, path: str) -> None:
    pending = QuotaRequestFactory(team=people.fleet.team, accelerator_type=people.fleet.accelerator)

    response = people.client("admin").post(
        path.format(id=pending.pk), b"", content_type="multipart/form-data; boundary=xyz"
    )

    assert_error_shape(response, 400)
    assert QuotaRequest.objects.get(pk=pending.pk).state == QuotaRequest.State.PENDING


def test_a_multipart_body_without_a_boundary_is_answered_in_the_error_shape(people: People) -> None:
    response = people.client("admin").post("/api/v1/quota-requests/", b"", content_type="multipart/form-data")

    assert_error_shape(response, 400)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("duration_s", True),
        ("time_limit_s", False),
        ("checkpoint_gb", True),
        ("duration_s", 1e-320),
        ("checkpoint_interval_s", -1e-320),
        ("duration_s", "٣٦٠٠"),
    ],
)
def test_booleans_subnormals_and_non_ascii_digits_are_not_numbers(people: People, field: str, value: Any) -> None:
    response = people.client("lead").post("/api/v1/jobs/", submission(people.fleet, **{field: value}), format="json")

    assert_error_shape(response, 400, attr=field)
    assert not Job.objects.exists()


def test_a_replay_refuses_a_boolean_for_its_days(people: People) -> None:
    response = people.client("admin").post(
        "/api/v1/simulations/", {"source": "history", "history_days": True}, format="json"
    )

    assert_error_shape(response, 400, attr="history_days")


def test_the_policy_refuses_a_boolean_for_a_number(people: People) -> None:
    response = people.client("admin").patch("/api/v1/policy/", {"preemption_grace_s": True}, format="json")

    assert_error_shape(response, 400, attr="preemption_grace_s")


def test_a_trace_with_a_field_over_the_csv_limit_is_a_field_error(people: People) -> None:
    huge = b"job_id,submit_time,duration,gpus,team\nj1,0,3600,8," + b"a" * (200 * 1024) + b"\n"
    upload = SimpleUploadedFile("jobs.csv", huge)

    response = people.client("admin").post(
        "/api/v1/simulations/", {"source": "trace", "trace": upload, "fleet_spec": "1x1x2x8:H100"}, format="multipart"
    )

    assert_error_shape(response, 400, attr="trace")
    assert "jobs.csv:2: is not readable CSV" in response.json()["errors"][0]["detail"]


def test_a_what_if_fleet_of_an_unknown_accelerator_is_refused(people: People) -> None:
    people.fleet.submit(gpus=8)

    response = people.client("admin").post(
        "/api/v1/simulations/",
        {"source": "history", "history_days": 1, "fleet_spec": "1x4x8x8:NOPE"},
        format="json",
    )

    assert_error_shape(response, 400, attr="fleet_spec")
    assert "NOPE" in response.json()["errors"][0]["detail"]


def test_an_idempotency_key_of_spaces_is_refused(people: People) -> None:
    response = people.client("lead").post(
        "/api/v1/jobs/", submission(people.fleet), format="json", HTTP_IDEMPOTENCY_KEY="   "
    )

    assert_error_shape(response, 400, attr="idempotency_key")
    assert not Job.objects.exists()


# Reports -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("start", "end"), [("9999-12-01", "9999-12-31"), ("0001-01-01", "0001-01-31")])
def test_a_usage_report_outside_the_reports_days_is_a_400(people: People, start: str, end: str) -> None:
    response = people.client("finance").get("/api/v1/reports/usage/", {"start": start, "end": end})

    assert_error_shape(response, 400, attr="end")
    assert "Reports cover days from 1970-01-01 to 9998-12-31." in response.json()["errors"][0]["detail"]


# OPTIONS and unknown paths -----------------------------------------------------------------------

V1_PATHS = [
    "jobs/",
    "jobs/1/",
    "jobs/1/cancel/",
    "jobs/1/events/",
    "teams/",
    "teams/language-models/",
    "teams/language-models/members/",
    "teams/language-models/quotas/H100/",
    "quota-requests/",
    "quota-requests/1/reject/",
    "priority-classes/",
    "priority-classes/training/",
    "nodes/",
    "nodes/pod-a-r1-n1/drain/",
    "incidents/",
    "simulations/",
    "simulations/1/cancel/",
    "policy/",
    "fleet/",
    "clock/",
    "accelerators/",
    "reports/usage/",
]


@pytest.mark.parametrize("path", V1_PATHS)
def test_options_describes_every_endpoint(people: People, path: str) -> None:
    response = people.client("admin").options(f"/api/v1/{path}")

    assert response.status_code == 200, response.content
    assert "application/json" in response.json()["renders"]


@pytest.mark.parametrize(
    "path", ["nope/", "jobs/-1/", "jobs/1/nope/", "v2/jobs/", "jobs/²/", "jobs/٣/", "incidents/9999999999999999999999/"]
)
def test_an_unknown_v1_path_is_a_json_404(people: People, path: str) -> None:
    for client in (people.client("lead"), APIClient()):
        response = client.get(f"/api/v1/{path}")

        assert response.status_code == 404
        assert response.json() == {
            "type": "client_error",
            "errors": [{"code": "not_found", "detail": "Not found.", "attr": None}],
        }


# Pages -------------------------------------------------------------------------------------------


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("raw_id", ["²", "٣", "99999999999999999999999"])
def test_marking_a_notice_read_with_a_foreign_id_changes_nothing(people: People, raw_id: str) -> None:
    notice = Notification.objects.create(user=people.lead, message="A notice.")

    response = _signed_in(people.lead).post("/notifications/read/", {"id": raw_id})

    assert response.status_code == 400
    notice.refresh_from_db()
    assert not notice.read


@pytest.mark.parametrize("query", ["²", "#²", "99999999999999999999999"])
def test_the_jobs_search_takes_unicode_digits_as_text(people: People, query: str) -> None:
    people.fleet.submit(gpus=8, name="sweep")

    response = _signed_in(people.lead).get("/jobs/", {"q": query})

    assert response.status_code == 200
    assert b"sweep" not in response.content.split(b"<tbody", 1)[-1]


@pytest.mark.parametrize("digits", ["٣", "３", "²"])
def test_html_forms_refuse_numbers_in_other_scripts(people: People, digits: str) -> None:
    quota = QuotaRequestForm(
        {"accelerator_type": "H100", "guaranteed": digits, "justification": "A bigger sweep, please."}
    )
    budget = BudgetForm({"team": people.fleet.team.pk, "unit": "money", "monthly_amount": digits})
    replay = SimulationForm(
        {"source": "history", "history_days": digits, "preset": "fleetline", "trace_format": "canonical", "seed": "0"},
        teams=[],
        fleet_wide=True,
    )

    assert "guaranteed" in quota.errors
    assert "monthly_amount" in budget.errors
    assert "history_days" in replay.errors


# The command line --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["show", "-1"], ["cancel", "0"], ["show", "٣"], ["jobs", "--limit", "-1"], ["queue", "--limit", "0"]],
)
def test_the_command_line_refuses_ids_and_limits_below_1(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    environ = {"FLEETLINE_URL": "http://127.0.0.1:9", "FLEETLINE_TOKEN": "t"}

    code = cli.main(argv, out=io.StringIO(), err=io.StringIO(), environ=environ)

    assert code == cli.EXIT_USAGE
    assert "a whole number, 1 or more" in capsys.readouterr().err


def test_a_usage_report_in_year_9999_exits_7_with_the_reports_days(people: People, live_server: Any) -> None:
    environ = {
        "FLEETLINE_URL": live_server.url,
        "FLEETLINE_TOKEN": api_token_create(user=people.finance, name="cli").secret,
    }
    err = io.StringIO()

    code = cli.main(
        ["usage", "--start", "9999-12-01", "--end", "9999-12-31"], out=io.StringIO(), err=err, environ=environ
    )

    assert code == cli.EXIT_INVALID
    assert "Reports cover days from 1970-01-01 to 9998-12-31." in err.getvalue()
