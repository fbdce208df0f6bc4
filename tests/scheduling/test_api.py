"""The jobs API: token or session auth, validation errors by field, team isolation."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduling.models import FleetClock, Job, Node, Pod, Rack
from tests.factories import MembershipFactory, TeamFactory, UserFactory
from tests.scheduling.conftest import Fleet


@pytest.fixture
def member_api(fleet: Fleet) -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=MembershipFactory(team=fleet.team).user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def _payload(fleet: Fleet, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "team": fleet.team.slug,
        "name": "api-run",
        "priority_class": fleet.training.pk,
        "accelerator_type": fleet.accelerator.pk,
        "gpus": 8,
        "duration_s": 3600,
    }
    data.update(overrides)
    return data


def test_a_member_submits_a_job_with_a_token_and_sees_why_it_waits(fleet: Fleet, member_api: APIClient) -> None:
    response = member_api.post("/api/jobs/submit/", _payload(fleet), format="json")

    assert response.status_code == 201
    body = response.json()
    assert body["state"] == "pending"
    assert body["pending_reason"] == "new"
    fleet.tick()
    assert member_api.get(f"/api/jobs/{body['id']}/").json()["state"] == "running"


def test_a_submission_may_declare_that_the_job_checkpoints_when_preempted(fleet: Fleet, member_api: APIClient) -> None:
    declared = member_api.post("/api/jobs/submit/", _payload(fleet, checkpoint_on_preempt=True), format="json")
    plain = member_api.post("/api/jobs/submit/", _payload(fleet, name="plain"), format="json")

    assert (declared.json()["checkpoint_on_preempt"], plain.json()["checkpoint_on_preempt"]) == (True, False)
    assert Job.objects.get(pk=declared.json()["id"]).checkpoint_on_preempt


def test_bad_input_is_refused_field_by_field_and_nothing_is_saved(fleet: Fleet, member_api: APIClient) -> None:
    response = member_api.post("/api/jobs/submit/", _payload(fleet, gpus=12, duration_s=-1), format="json")

    assert response.status_code == 400
    assert "duration_s" in response.json()
    response = member_api.post("/api/jobs/submit/", _payload(fleet, gpus=12), format="json")
    assert response.status_code == 400
    assert "multiple of 8" in response.json()["gpus"][0]
    assert not Job.objects.exists()


def test_a_member_cannot_submit_to_another_team(fleet: Fleet, member_api: APIClient) -> None:
    other = TeamFactory(name="Other", slug="other")

    response = member_api.post("/api/jobs/submit/", _payload(fleet, team=other.slug), format="json")

    assert response.status_code == 400
    assert response.json() == {"team": ["No such team among yours."]}


def test_an_outsider_cannot_see_or_cancel_a_job(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8)
    outsider = APIClient()
    outsider.force_authenticate(UserFactory())

    assert outsider.get(f"/api/jobs/{job.pk}/").status_code == 404
    assert outsider.post(f"/api/jobs/{job.pk}/cancel/").status_code == 404
    assert outsider.get("/api/jobs/").json() == []


def test_anonymous_requests_are_refused(fleet: Fleet) -> None:
    assert APIClient().get("/api/jobs/").status_code in (401, 403)


def test_a_member_cancels_through_the_api_and_a_second_cancel_is_refused(fleet: Fleet, member_api: APIClient) -> None:
    job = fleet.submit(gpus=8)

    assert member_api.post(f"/api/jobs/{job.pk}/cancel/").json()["state"] == "cancelled"
    assert member_api.post(f"/api/jobs/{job.pk}/cancel/").status_code == 400


@pytest.mark.parametrize("depth", [5_000, 100])
def test_a_deeply_nested_json_body_is_refused_with_a_400_not_a_500(
    fleet: Fleet, member_api: APIClient, depth: int
) -> None:
    body = '{"team": ' + "[" * depth + "]" * depth + "}"

    response = member_api.post("/api/jobs/submit/", body, content_type="application/json")

    assert response.status_code == 400
    assert "nested more than 32 levels deep" in response.json()["detail"]
    assert not Job.objects.exists()


def test_a_json_body_nested_within_the_limit_is_read_as_usual(fleet: Fleet, member_api: APIClient) -> None:
    response = member_api.post("/api/jobs/submit/", {**_payload(fleet), "labels": {"a": [[1]]}}, format="json")

    assert response.status_code == 201


# A token with its user; the team among the member's; the priority class; the accelerator with
# its nodes, the team's quota and the clock; the job; its event; with an idempotency key, the
# savepoint around the insert and its release.
SUBMIT_QUERIES = {"": 6, "retry-safe-1": 8}


@pytest.mark.parametrize("idempotency_key", ["", "retry-safe-1"])
def test_a_submission_takes_the_same_few_queries_on_a_small_fleet_or_a_busy_one(
    fleet: Fleet, member_api: APIClient, django_assert_num_queries: Any, idempotency_key: str
) -> None:
    headers = {"HTTP_IDEMPOTENCY_KEY": idempotency_key} if idempotency_key else {}
    with django_assert_num_queries(SUBMIT_QUERIES[idempotency_key]):
        first = member_api.post("/api/jobs/submit/", _payload(fleet, name="first"), format="json", **headers)
    assert first.status_code == 201
    assert first.json()["priority_class"] == "training" and first.json()["accelerator_type"] == "H100"

    rack = Rack.objects.create(pod=Pod.objects.first(), name="pod-a-r9")
    for n in range(20):
        Node.objects.create(rack=rack, name=f"pod-a-r9-n{n}", accelerator_type=fleet.accelerator)
    for i in range(20):
        fleet.submit(gpus=8, name=f"queued-{i}")
    fleet.tick()
    headers = {"HTTP_IDEMPOTENCY_KEY": f"{idempotency_key}-2"} if idempotency_key else {}
    with django_assert_num_queries(SUBMIT_QUERIES[idempotency_key]):
        second = member_api.post("/api/jobs/submit/", _payload(fleet, name="second"), format="json", **headers)
    assert second.status_code == 201
    assert Job.objects.get(pk=second.json()["id"]).submit_s == FleetClock.objects.get().sim_now_s
