"""The five people every v1 endpoint is tried with: the team's lead (owner), a member, an
outsider (another team's lead), finance and a fleet admin; each with an API client that sends
their own bearer token, made as the tokens page makes them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from api.services import api_token_create
from tenants.models import Membership
from tenants.roles import FINANCE, FLEET_ADMIN
from tests.factories import MembershipFactory, TeamFactory, UserFactory
from tests.scheduling.conftest import Fleet, build_fleet


def bearer_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='tests').secret}")
    return client


@dataclass
class People:
    fleet: Fleet
    lead: User
    member: User
    outsider: User
    finance: User
    admin: User

    def client(self, who: str) -> APIClient:
        return bearer_client(getattr(self, who))


@pytest.fixture
def people(db: None) -> People:
    fleet = build_fleet()
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD, user__username="lead").user
    member = MembershipFactory(team=fleet.team, user__username="member").user
    other = TeamFactory(name="Vision", slug="vision")
    outsider = MembershipFactory(team=other, role=Membership.Role.LEAD, user__username="outsider").user
    finance = UserFactory(username="finance")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE)[0])
    admin = UserFactory(username="admin")
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    return People(fleet, lead, member, outsider, finance, admin)


def submission(fleet: Fleet, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "team": fleet.team.slug,
        "name": "api-run",
        "priority_class": fleet.training.name,
        "accelerator": fleet.accelerator.name,
        "gpus": 8,
        "duration_s": 3600,
    }
    data.update(overrides)
    return data
