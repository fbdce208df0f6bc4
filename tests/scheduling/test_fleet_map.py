"""The fleet map names jobs only to those who may see them: the team's own lead and members,
and fleet admins. Everyone else sees another team's job with its GPU count."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from scheduling.selectors import OTHER_TEAMS_JOB, fleet_map
from tenants.models import Membership
from tenants.roles import FINANCE, FLEET_ADMIN
from tests.factories import MembershipFactory, TeamFactory, UserFactory
from tests.scheduling.conftest import Fleet

SECRET = "secret-pretraining-run"


def _in_group(name: str) -> User:
    user = UserFactory()
    user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


def _viewers(fleet: Fleet) -> dict[str, User]:
    return {
        "owner": MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user,
        "member": MembershipFactory(team=fleet.team).user,
        "outsider": MembershipFactory(team=TeamFactory(name="Vision", slug="vision")).user,
        "finance": _in_group(FINANCE),
        "admin": _in_group(FLEET_ADMIN),
    }


def _map_html(user: User) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/fleet/")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    ("viewer", "sees_name"),
    [("owner", True), ("member", True), ("outsider", False), ("finance", False), ("admin", True)],
)
def test_the_fleet_map_names_a_job_only_to_its_team_and_fleet_admins(
    fleet: Fleet, viewer: str, sees_name: bool
) -> None:
    fleet.submit(gpus=8, name=SECRET)
    fleet.tick()

    html = _map_html(_viewers(fleet)[viewer])

    assert (f"{SECRET} (8)" in html) is sees_name
    assert (f"{OTHER_TEAMS_JOB} (8)".replace("'", "&#x27;") in html) is not sees_name
    assert html.count('class="node ') == 4


def test_a_member_sees_their_own_jobs_by_name_and_other_teams_jobs_only_as_gpu_counts(fleet: Fleet) -> None:
    vision = TeamFactory(name="Vision", slug="vision")
    fleet.submit(gpus=8, name="ours")
    fleet.submit(gpus=16, name=SECRET, team=vision)
    fleet.tick()
    member = MembershipFactory(team=fleet.team).user

    labels = [job for pod in fleet_map(user=member) for rack in pod.racks for node in rack.nodes for job in node.jobs]

    assert sorted(labels) == sorted(["ours (8)", f"{OTHER_TEAMS_JOB} (8)", f"{OTHER_TEAMS_JOB} (8)"])


def test_the_fleet_map_costs_the_same_few_queries_however_many_jobs_run(
    fleet: Fleet, django_assert_num_queries: object
) -> None:
    for n in range(4):
        fleet.submit(gpus=4, name=f"job-{n}")
    fleet.tick()
    member = MembershipFactory(team=fleet.team).user

    with django_assert_num_queries(4):  # type: ignore[operator]
        fleet_map(user=member)
