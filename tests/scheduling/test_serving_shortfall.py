"""The dashboard names why serving falls short: the replicas that wait and what holds them; fleet
admins also read the quota that does, and the team."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from scheduling.models import Job, ServingDeployment
from scheduling.serving_shortfall import serving_blocked
from tenants.models import Quota
from tenants.roles import FLEET_ADMIN
from tests.factories import MembershipFactory, UserFactory
from tests.scheduling.conftest import Fleet

pytestmark = pytest.mark.django_db


def _blocked_by_quota(fleet: Fleet) -> ServingDeployment:
    """Two 8-GPU replicas wanted all day; the team's quota holds one."""
    Quota.objects.filter(team=fleet.team).update(guaranteed=8, borrow_limit=0)
    deployment = ServingDeployment.objects.create(
        team=fleet.team,
        name="search-api",
        priority_class=fleet.serving,
        accelerator_type=fleet.accelerator,
        gpus_per_replica=8,
        min_replicas=2,
        max_replicas=2,
    )
    for _ in range(3):
        fleet.tick()
    assert Job.objects.filter(deployment=deployment, state=Job.State.PENDING).count() == 1
    return deployment


def _client(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def test_the_dashboard_names_the_replicas_a_quota_holds_and_admins_read_the_quota(fleet: Fleet) -> None:
    _blocked_by_quota(fleet)
    admin = UserFactory()
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])

    page = _client(admin).get("/").content.decode()

    assert 'id="serving-cause"' in page
    assert "1 replica (8 H100 GPUs) of <strong>search-api</strong>" in page
    assert 'href="/teams/language-models/">Language Models</a>' in page
    assert "The team's H100 quota holds them: 8 GPUs guaranteed, borrow limit 0, 8 in use." in page
    assert "waits: the team&#x27;s quota (guarantee plus borrow limit) is in use" in page


def test_a_member_reads_the_cause_and_an_outsider_reads_it_without_names_or_quota(fleet: Fleet) -> None:
    _blocked_by_quota(fleet)
    member = MembershipFactory(team=fleet.team).user

    ours = _client(member).get("/").content.decode()
    theirs = _client(UserFactory()).get("/").content.decode()

    assert "of <strong>search-api</strong> (Language Models) waits:" in ours and "quota holds them" not in ours
    assert "1 replica (8 H100 GPUs) of another team's deployment waits:" in theirs
    assert "search-api" not in theirs and "Language Models" not in theirs


def test_nothing_is_said_while_serving_meets_its_objective(fleet: Fleet) -> None:
    assert serving_blocked(user=UserFactory()) == []
    assert 'id="serving-cause"' not in _client(UserFactory()).get("/").content.decode()
