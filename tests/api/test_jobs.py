"""Jobs through /api/v1/: submit by names with the form's validation, list with filters and
cursor pages, detail with the pending reason, cancel, events; who may do what."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from api.views import jobs
from scheduling.models import AcceleratorType, Job
from tenants.models import PriorityClass
from tests.api.conftest import People, submission
from tests.factories import PriorityClassFactory

ALL = ["lead", "member", "outsider", "finance", "admin"]


def test_a_member_submits_by_names_and_sees_why_the_job_waits(people: People) -> None:
    client = people.client("member")

    response = client.post("/api/v1/jobs/", submission(people.fleet), format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["state"], body["pending"]["reason"], body["team"]) == ("pending", "new", "language-models")
    assert (body["priority_class"], body["accelerator"], body["submitted_by"]) == ("training", "H100", "member")
    assert body["checkpoint_on_preempt"] is False
    assert response["Location"].endswith(f"/api/v1/jobs/{body['id']}/")
    people.fleet.tick()
    detail = client.get(f"/api/v1/jobs/{body['id']}/").json()
    assert (detail["state"], detail["pending"]) == ("running", None)
    assert sum(node["gpus"] for node in detail["nodes"]) == 8


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"gpus": 12}, "gpus", "multiple of 8"),
        ({"gpus": 0}, "gpus", "at least 1"),
        ({"duration_s": -1}, "duration_s", "positive"),
        ({"time_limit_s": 1e12}, "time_limit_s", "at most"),
        ({"checkpoint_interval_s": 0}, "checkpoint_interval_s", "at least"),
        ({"min_gpus": 16}, "min_gpus", "between 1 and the gang size"),
        ({"max_gpus": 4}, "max_gpus", "below the gang size"),
        ({"name": "   "}, "name", "blank"),
        ({"priority_class": "nope"}, "priority_class", "No priority class"),
        ({"accelerator": "TPU"}, "accelerator", "No accelerator type"),
        ({"kind": "serving"}, "priority_class", "is for training jobs"),
        ({"gpus": "many"}, "gpus", "valid integer"),
        ({"required_level": "galaxy"}, "required_level", "not a valid choice"),
        ({"team": "vision"}, "team", "No such team among yours"),
    ],
)
def test_bad_submissions_are_refused_field_by_field_in_one_format_and_nothing_is_saved(
    people: People, overrides: dict[str, object], field: str, words: str
) -> None:
    response = people.client("member").post("/api/v1/jobs/", submission(people.fleet, **overrides), format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "validation_error"
    problems = {error["attr"]: error["detail"] for error in body["errors"]}
    assert field in problems, body
    assert words.lower() in problems[field].lower()
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"gpus": 16, "required_level": "node"},
            "On H100 a gang that must fit within one node can have at most 8 GPUs;"
            " within one rack at most 16; within one pod at most 32.",
        ),
        (
            {"gpus": 24, "required_level": "rack"},
            "On H100 a gang that must fit within one rack can have at most 16 GPUs; within one pod at most 32.",
        ),
    ],
)
def test_a_gang_no_healthy_fleet_of_this_shape_could_hold_is_refused_with_what_fits(
    people: People, overrides: dict[str, object], message: str
) -> None:
    response = people.client("member").post("/api/v1/jobs/", submission(people.fleet, **overrides), format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "validation_error"
    assert [(error["attr"], error["detail"]) for error in body["errors"]] == [("gpus", message)]
    assert not Job.objects.exists()


def test_a_gang_that_fits_its_required_level_is_taken(people: People) -> None:
    client = people.client("member")

    for gpus, level in ((8, "node"), (16, "rack"), (32, "pod")):
        response = client.post(
            "/api/v1/jobs/", submission(people.fleet, gpus=gpus, required_level=level), format="json"
        )
        assert response.status_code == 201, response.json()
    assert Job.objects.count() == 3


def test_a_submission_may_declare_that_the_job_checkpoints_when_preempted(people: People) -> None:
    payload = submission(people.fleet, checkpoint_on_preempt=True)

    response = people.client("member").post("/api/v1/jobs/", payload, format="json")

    assert response.json()["checkpoint_on_preempt"] is True
    assert Job.objects.get(pk=response.json()["id"]).checkpoint_on_preempt


def test_a_malformed_body_is_a_client_error_in_the_same_format(people: People) -> None:
    response = people.client("member").post("/api/v1/jobs/", "{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["type"] == "client_error"


def test_an_anonymous_call_gets_401_with_a_bearer_challenge() -> None:
    response = APIClient().get("/api/v1/jobs/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["errors"][0]["code"] == "not_authenticated"


def test_a_bad_or_revoked_token_is_refused(people: People) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer fl_not-a-real-token")

    assert client.get("/api/v1/jobs/").status_code == 401


@pytest.mark.parametrize(
    ("who", "sees"), [("lead", True), ("member", True), ("outsider", False), ("finance", False), ("admin", True)]
)
def test_who_sees_a_teams_job(people: People, who: str, sees: bool) -> None:
    job = people.fleet.submit(gpus=8)
    client = people.client(who)

    listed = [row["id"] for row in client.get("/api/v1/jobs/").json()["results"]]
    detail = client.get(f"/api/v1/jobs/{job.pk}/")
    events = client.get(f"/api/v1/jobs/{job.pk}/events/")

    assert (job.pk in listed) is sees
    assert detail.status_code == (200 if sees else 404)
    assert events.status_code == (200 if sees else 404)
    if sees:
        assert events.json()[0]["kind"] == "submitted"


@pytest.mark.parametrize(
    ("who", "status"), [("lead", 200), ("member", 200), ("outsider", 404), ("finance", 404), ("admin", 200)]
)
def test_who_may_cancel_a_teams_job(people: People, who: str, status: int) -> None:
    job = people.fleet.submit(gpus=8)

    response = people.client(who).post(f"/api/v1/jobs/{job.pk}/cancel/")

    assert response.status_code == status
    job.refresh_from_db()
    assert (job.state == Job.State.CANCELLED) is (status == 200)


def test_cancelling_an_ended_job_is_a_conflict(people: People) -> None:
    job = people.fleet.submit(gpus=8)
    client = people.client("member")
    client.post(f"/api/v1/jobs/{job.pk}/cancel/")

    response = client.post(f"/api/v1/jobs/{job.pk}/cancel/")

    assert response.status_code == 409
    assert "already ended" in response.json()["errors"][0]["detail"]


@pytest.mark.parametrize("who", ["outsider", "finance"])
def test_people_outside_the_team_cannot_submit_to_it(people: People, who: str) -> None:
    response = people.client(who).post("/api/v1/jobs/", submission(people.fleet), format="json")

    assert response.status_code == 400
    assert not Job.objects.exists()


def test_the_list_pages_by_cursor_without_repeats_or_gaps(people: People) -> None:
    ids = {people.fleet.submit(gpus=1, name=f"j{i}").pk for i in range(7)}
    client = people.client("member")

    seen: list[int] = []
    url: str | None = "/api/v1/jobs/?page_size=3"
    while url:
        page = client.get(url).json()
        assert len(page["results"]) <= 3
        seen += [row["id"] for row in page["results"]]
        url = page["next"]

    assert seen == sorted(ids, reverse=True)


def test_filters_narrow_the_list(people: People) -> None:
    fleet = people.fleet
    running = fleet.submit(gpus=8, name="runs")
    fleet.tick()
    waiting = fleet.submit(gpus=16, name="waits")
    batch = fleet.submit(gpus=1, name="batch")
    client = people.client("admin")

    def ids(query: str) -> set[int]:
        response = client.get(f"/api/v1/jobs/?{query}")
        assert response.status_code == 200, response.json()
        return {row["id"] for row in response.json()["results"]}

    assert ids("state=running") == {running.pk}
    assert ids("state=pending") == {waiting.pk, batch.pk}
    assert ids("state=pending&state=running") == {running.pk, waiting.pk, batch.pk}
    assert ids("team=vision") == set()
    assert ids("accelerator=H100&kind=training") == {running.pk, waiting.pk, batch.pk}
    assert ids("user=nobody") == set()
    assert ids("submitted_after=2000-01-01T00:00:00Z") == {running.pk, waiting.pk, batch.pk}
    assert ids("submitted_before=2000-01-01T00:00:00Z") == set()


def test_a_bad_filter_value_is_a_validation_error(people: People) -> None:
    response = people.client("member").get("/api/v1/jobs/?state=exploded")

    assert response.status_code == 400
    assert response.json()["errors"][0]["attr"] == "state"


@pytest.mark.parametrize(
    "moment",
    ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "yesterday"],
)
def test_a_time_filter_postgresql_cannot_hold_is_a_validation_error_not_a_server_error(
    people: People, moment: str
) -> None:
    response = people.client("member").get("/api/v1/jobs/", {"submitted_after": moment})

    assert response.status_code == 400
    assert response.json()["errors"][0]["attr"] == "submitted_after"


def test_a_time_filter_with_an_offset_postgresql_refuses_means_the_same_instant(people: People) -> None:
    job = people.fleet.submit(gpus=8, name="runs")
    client = people.client("admin")
    assert client.get("/api/v1/jobs/", {"submitted_after": "0184-12-03T18:20:38+19:52"}).status_code == 200
    just_before = (job.created_at - timedelta(seconds=1)).astimezone(timezone(timedelta(hours=20)))

    response = client.get("/api/v1/jobs/", {"submitted_after": just_before.isoformat()})

    assert response.status_code == 200
    assert [row["id"] for row in response.json()["results"]] == [job.pk]


def test_a_retry_with_the_same_idempotency_key_gets_the_same_job(people: People) -> None:
    client = people.client("member")
    first = client.post("/api/v1/jobs/", submission(people.fleet), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = client.post("/api/v1/jobs/", submission(people.fleet), format="json", HTTP_IDEMPOTENCY_KEY="k-1")

    assert (first.status_code, again.status_code) == (201, 201)
    assert first.json()["id"] == again.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 1


def test_names_resolved_once_are_not_looked_up_again(people: People) -> None:
    client = people.client("member")
    jobs._IDS_BY_NAME.clear()

    with CaptureQueriesContext(connection) as cold:
        assert client.post("/api/v1/jobs/", submission(people.fleet, name="a"), format="json").status_code == 201
    with CaptureQueriesContext(connection) as warm:
        assert client.post("/api/v1/jobs/", submission(people.fleet, name="b"), format="json").status_code == 201

    assert len(warm.captured_queries) == len(cold.captured_queries) - 1
    assert not any("UNION" in query["sql"] for query in warm.captured_queries)


def test_a_renamed_class_or_accelerator_is_not_found_by_its_old_name_once_its_id_was_remembered(
    people: People,
) -> None:
    client = people.client("member")
    assert client.post("/api/v1/jobs/", submission(people.fleet, name="a"), format="json").status_code == 201
    PriorityClass.objects.filter(name="training").update(name="training-old")
    AcceleratorType.objects.filter(name="H100").update(name="H100-sxm")

    response = client.post("/api/v1/jobs/", submission(people.fleet, name="b"), format="json")

    assert response.status_code == 400
    assert {error["attr"] for error in response.json()["errors"]} == {"priority_class", "accelerator"}
    renamed = submission(people.fleet, name="c", priority_class="training-old", accelerator="H100-sxm")
    assert client.post("/api/v1/jobs/", renamed, format="json").status_code == 201
    assert sorted(Job.objects.values_list("name", flat=True)) == ["a", "c"]


def test_a_name_moved_to_another_row_is_submitted_to_the_row_that_has_it_now(people: People) -> None:
    client = people.client("member")
    batch = PriorityClassFactory(name="low", value=100, kind="training", preemptible=True)
    assert client.post("/api/v1/jobs/", submission(people.fleet, name="a"), format="json").status_code == 201
    training = people.fleet.training
    PriorityClass.objects.filter(pk=training.pk).update(name="was-training")
    PriorityClass.objects.filter(pk=batch.pk).update(name="training")

    response = client.post("/api/v1/jobs/", submission(people.fleet, name="b", duration_s=60), format="json")

    assert response.status_code == 201, response.json()
    assert Job.objects.get(name="b").priority_class_id == batch.pk
    assert Job.objects.get(name="a").priority_class_id == training.pk


def test_listing_takes_a_fixed_number_of_queries(people: People, django_assert_max_num_queries: object) -> None:
    for i in range(20):
        people.fleet.submit(gpus=1, name=f"j{i}")
    client = people.client("admin")

    with django_assert_max_num_queries(6):  # type: ignore[operator]
        assert len(client.get("/api/v1/jobs/").json()["results"]) == 20
