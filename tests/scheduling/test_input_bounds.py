"""Every number a job carries is finite and within scheduling.limits, at every entry: the browser
form, the API, the submit service (after unit conversion), the model's validators (what the Django
admin and full_clean use) and the database's check constraints."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client
from rest_framework.test import APIClient

from scheduling.limits import MAX_CHECKPOINT_GB, MAX_DURATION_S, MAX_GANG_GPUS, range_problem
from scheduling.models import Job, SchedulerEvent, ServingDeployment
from scheduling.services.jobs import JobSpec, job_submit
from tests.factories import MembershipFactory
from tests.scheduling.conftest import Fleet


@pytest.fixture
def member_user(fleet: Fleet) -> User:
    return MembershipFactory.create(team=fleet.team).user


@pytest.fixture
def member(member_user: User) -> Client:
    client = Client()
    client.force_login(member_user)
    return client


@pytest.fixture
def member_api(member_user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(member_user)
    return client


def _form(fleet: Fleet, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "team": fleet.team.pk,
        "name": "bounded",
        "kind": "training",
        "priority_class": fleet.training.pk,
        "accelerator_type": fleet.accelerator.pk,
        "gpus": 8,
        "duration_h": 2,
    }
    data.update(overrides)
    return data


def _payload(fleet: Fleet, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "team": fleet.team.slug,
        "name": "bounded",
        "priority_class": fleet.training.name,
        "accelerator": fleet.accelerator.name,
        "gpus": 8,
        "duration_s": 3600,
    }
    data.update(overrides)
    return data


def _attrs(body: dict[str, Any]) -> list[str | None]:
    """The fields an API v1 error names."""
    return [error["attr"] for error in body["errors"]]


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"duration_h": "1e306"}, "duration_h", "less than or equal to 8760"),
        ({"time_limit_h": "1e306"}, "time_limit_h", "less than or equal to 8760"),
        ({"checkpoint_interval_min": "1e306"}, "checkpoint_interval_min", "less than or equal to 525600"),
        ({"checkpoint_gb": "1e308"}, "checkpoint_gb", "less than or equal to 1000000"),
        ({"duration_h": "inf"}, "duration_h", "Enter a number"),
        ({"duration_h": "nan"}, "duration_h", "Enter a number"),
        ({"gpus": str(10**20)}, "gpus", "less than or equal to 65536"),
        ({"max_gpus": str(10**20)}, "max_gpus", "less than or equal to 65536"),
        ({"min_gpus": str(10**12)}, "min_gpus", "less than or equal to 65536"),
    ],
)
def test_the_submit_form_refuses_huge_and_non_finite_numbers_and_saves_nothing(
    fleet: Fleet, member: Client, overrides: dict[str, object], field: str, message: str
) -> None:
    response = member.post("/jobs/new/", _form(fleet, **overrides))

    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors[field])
    assert not Job.objects.exists()
    assert not SchedulerEvent.objects.filter(kind=SchedulerEvent.Kind.SUBMITTED).exists()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"duration_s": 1e308}, "duration_s"),
        ({"time_limit_s": 1e308}, "time_limit_s"),
        ({"checkpoint_interval_s": 1e308}, "checkpoint_interval_s"),
        ({"checkpoint_gb": 1e308}, "checkpoint_gb"),
        ({"gpus": 10**20}, "gpus"),
        ({"max_gpus": 10**12}, "max_gpus"),
        ({"max_gpus": 10**20}, "max_gpus"),
        ({"min_gpus": 10**20}, "min_gpus"),
    ],
)
def test_the_api_refuses_huge_numbers_field_by_field_and_saves_nothing(
    fleet: Fleet, member_api: APIClient, overrides: dict[str, object], field: str
) -> None:
    response = member_api.post("/api/v1/jobs/", _payload(fleet, **overrides), format="json")

    assert response.status_code == 400
    assert field in _attrs(response.json())
    assert not Job.objects.exists()


def test_the_api_refuses_a_json_number_that_overflows_to_infinity(fleet: Fleet, member_api: APIClient) -> None:
    body = '{"team": "%s", "name": "x", "priority_class": "%s", "accelerator": "%s", "gpus": 8, "duration_s": 1e400}'

    response = member_api.post(
        "/api/v1/jobs/",
        body % (fleet.team.slug, fleet.training.name, fleet.accelerator.name),
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "duration_s" in _attrs(response.json())
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "key", "message"),
    [
        ("duration_s", math.inf, "duration", "Duration must be a finite number."),
        ("duration_s", math.nan, "duration", "Duration must be a finite number."),
        ("duration_s", MAX_DURATION_S * 1.0001, "duration", "Duration must be at most 31,536,000 s."),
        ("time_limit_s", -math.inf, "time_limit", "Time limit must be a finite number."),
        (
            "checkpoint_interval_s",
            1e306 * 60,
            "checkpoint_interval",
            "Checkpoint interval must be at most 31,536,000 s.",
        ),
        ("time_limit_s", 1e306 * 3600, "time_limit", "Time limit must be a finite number."),
        ("checkpoint_gb", MAX_CHECKPOINT_GB + 1, "checkpoint_gb", "Checkpoint size must be at most 1,000,000 GB."),
        ("gpus", 10**20, "gpus", "GPUs must be at most 65,536."),
        ("max_gpus", 10**12, "max_gpus", "Maximum GPUs must be at most 65,536."),
    ],
)
def test_the_submit_service_checks_the_bounds_in_seconds_after_conversion(
    fleet: Fleet, field: str, value: float, key: str, message: str
) -> None:
    spec = JobSpec(
        name="direct",
        kind="training",
        priority_class_id=fleet.training.pk,
        accelerator_type_id=fleet.accelerator.pk,
        gpus=8,
        duration_s=3600.0,
    )

    with pytest.raises(ValidationError) as caught:
        job_submit(team=fleet.team, spec=JobSpec(**{**_fields(spec), field: value}), user=None)

    assert caught.value.message_dict[key] == [message]
    assert not Job.objects.exists()


def _fields(spec: JobSpec) -> dict[str, object]:
    return {name: getattr(spec, name) for name in JobSpec.__slots__}


def test_a_job_at_the_bounds_is_accepted_and_every_page_shows_it(
    fleet: Fleet, member: Client, member_api: APIClient
) -> None:
    response = member.post(
        "/jobs/new/", _form(fleet, duration_h=8760, time_limit_h=8760, checkpoint_interval_min=525600)
    )

    job = Job.objects.get()
    assert response.status_code == 302
    assert (job.duration_s, job.time_limit_s, job.checkpoint_interval_s) == (MAX_DURATION_S,) * 3
    fleet.tick()
    assert member.get(f"/jobs/{job.pk}/").status_code == 200
    assert member.get("/jobs/").status_code == 200
    assert member_api.get(f"/api/v1/jobs/{job.pk}/").json()["duration_s"] == MAX_DURATION_S
    assert member_api.get("/api/v1/jobs/").status_code == 200


def _stored_job(fleet: Fleet) -> Job:
    return job_submit(
        team=fleet.team,
        spec=JobSpec(
            name="stored",
            kind="training",
            priority_class_id=fleet.training.pk,
            accelerator_type_id=fleet.accelerator.pk,
            gpus=8,
            duration_s=3600.0,
        ),
        user=None,
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("duration_s", math.inf, "Must be a finite number."),
        ("duration_s", math.nan, "Must be a finite number."),
        ("duration_s", 0.0, "Must be positive."),
        ("time_limit_s", 1e308, "Must be at most 31,536,000 s."),
        ("checkpoint_interval_s", math.inf, "Must be a finite number."),
        ("checkpoint_gb", 1e308, "Must be at most 1,000,000 GB."),
        ("gpus", 10**12, "Must be at most 65,536 GPUs."),
        ("max_gpus", MAX_GANG_GPUS + 1, "Must be at most 65,536 GPUs."),
    ],
)
def test_full_clean_and_so_the_admin_refuse_out_of_range_numbers(
    fleet: Fleet, field: str, value: float, message: str
) -> None:
    job = _stored_job(fleet)
    setattr(job, field, value)

    with pytest.raises(ValidationError) as caught:
        job.full_clean()

    assert message in caught.value.message_dict[field]


@pytest.mark.parametrize(
    ("field", "value"),
    [("duration_s", math.inf), ("time_limit_s", 1e308), ("checkpoint_gb", -1.0), ("max_gpus", 10**6)],
)
def test_the_database_refuses_out_of_range_numbers_written_around_the_services(
    fleet: Fleet, field: str, value: float
) -> None:
    job = _stored_job(fleet)

    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(**{field: value})


@pytest.mark.parametrize(("field", "value"), [("period_h", 0.0), ("period_h", math.inf), ("peak_hour", math.nan)])
def test_a_serving_deployments_demand_curve_is_bounded_too(fleet: Fleet, field: str, value: float) -> None:
    deployment = ServingDeployment(
        team=fleet.team, name="chat", priority_class=fleet.serving, accelerator_type=fleet.accelerator
    )
    setattr(deployment, field, value)

    with pytest.raises(ValidationError) as caught:
        deployment.full_clean()

    assert field in caught.value.message_dict


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (math.inf, "must be a finite number"),
        (-math.inf, "must be a finite number"),
        (math.nan, "must be a finite number"),
        (0.0, "must be positive"),
        (MAX_DURATION_S + 1, "must be at most 31,536,000 s"),
        (MAX_DURATION_S, None),
        (0.5, None),
    ],
)
def test_range_problem_refuses_what_plain_comparisons_let_through(value: float, problem: str | None) -> None:
    assert range_problem(value, positive=True, maximum=MAX_DURATION_S, unit="s") == problem
