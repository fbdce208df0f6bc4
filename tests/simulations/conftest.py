"""People and traces for the what-if replay tests: a fleet admin, team alpha's lead and member,
and the lead of another team (the outsider)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, User

from simulations.models import Simulation
from simulations.services import SimulationRequest, simulation_start
from tenants.models import Membership, Team
from tenants.roles import FLEET_ADMIN
from tests.factories import MembershipFactory, TeamFactory, UserFactory

# Three jobs on a 16-GPU fleet (1 pod x 1 rack x 2 nodes x 8 GPUs): small enough for a test.
GOOD_TRACE = b"""job_id,submit_time,duration,gpus,team
j1,0,3600,8,alpha
j2,60,1800,4,beta
j3,120,7200,16,alpha
j4,180,600,2,alpha
"""
BAD_TRACE = b"""job_id,submit_time,duration,gpus,team
j1,0,3600,8,alpha
j2,60,soon,4,beta
j3,120,7200,0,alpha
"""
SMALL_FLEET = "1x1x2x8"


@dataclass
class People:
    alpha: Team
    beta: Team
    admin: User
    lead: User
    member: User
    outsider: User


@pytest.fixture
def people(db: None) -> People:
    return people_build()


def people_build() -> People:
    alpha = TeamFactory(name="Alpha", slug="alpha")
    beta = TeamFactory(name="Beta", slug="beta")
    admin = UserFactory(username="admin")
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    lead = MembershipFactory(team=alpha, role=Membership.Role.LEAD, user__username="lead").user
    member = MembershipFactory(team=alpha, user__username="member").user
    outsider = MembershipFactory(team=beta, role=Membership.Role.LEAD, user__username="outsider").user
    return People(alpha, beta, admin, lead, member, outsider)


def trace_request(**overrides: object) -> SimulationRequest:
    values: dict[str, object] = {
        "source": "trace",
        "preset": "easy",
        "trace_name": "trace.csv",
        "trace_data": GOOD_TRACE,
        "fleet_spec": SMALL_FLEET,
    }
    values.update(overrides)
    return SimulationRequest(**values)  # type: ignore[arg-type]


@pytest.fixture
def team_simulation(people: People) -> Simulation:
    """A replay of alpha's, started by its lead and not run yet."""
    return simulation_start(user=people.lead, request=trace_request(team=people.alpha))


@pytest.fixture
def fleet_simulation(people: People) -> Simulation:
    """A whole-fleet replay, started by the admin and not run yet."""
    return simulation_start(user=people.admin, request=trace_request())
