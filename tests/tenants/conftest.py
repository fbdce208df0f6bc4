"""A small fleet (4 H100 nodes = 32 GPUs, 2 A100 nodes = 16 GPUs), one team with a lead and a
member, an outsider in another team, a fleet admin and a finance user."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from scheduling.models import AcceleratorType
from tenants.models import Membership, Team
from tenants.roles import FINANCE, FLEET_ADMIN
from tests.factories import (
    AcceleratorTypeFactory,
    MembershipFactory,
    NodeFactory,
    TeamFactory,
    UserFactory,
)


@dataclass
class World:
    h100: AcceleratorType
    a100: AcceleratorType
    team: Team
    other_team: Team
    lead: User
    member: User
    outsider: User
    admin: User
    finance: User


@pytest.fixture
def world(db: None) -> World:
    h100 = AcceleratorTypeFactory(name="H100")
    a100 = AcceleratorTypeFactory(name="A100")
    NodeFactory.create_batch(4, accelerator_type=h100)
    NodeFactory.create_batch(2, accelerator_type=a100)
    team = TeamFactory(name="Language Models", slug="language-models")
    other_team = TeamFactory(name="Vision", slug="vision")
    lead = MembershipFactory(team=team, role=Membership.Role.LEAD, user__email="lead@example.com").user
    member = MembershipFactory(team=team, role=Membership.Role.MEMBER).user
    outsider = MembershipFactory(team=other_team, role=Membership.Role.LEAD).user
    admin = UserFactory(username="fleet-admin")
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    finance = UserFactory(username="finance")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE)[0])
    return World(h100, a100, team, other_team, lead, member, outsider, admin, finance)


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client
