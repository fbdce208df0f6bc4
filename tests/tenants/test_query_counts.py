"""The team page and the approval queue cost a fixed number of queries, whatever the rows."""

from __future__ import annotations

import pytest

from tests.factories import AcceleratorTypeFactory, QuotaFactory, QuotaRequestFactory, TeamFactory
from tests.tenants.conftest import World, client_for

pytestmark = pytest.mark.django_db

# session, user, groups, team, membership role, quotas, capacity, accelerator types (table and form),
# request history, current usage, pending jobs, the fleet clock, the nav's unread-notice count, and
# the budget block's role check and budget lookup, the member list, the usage ledger for the
# usage chart, and the fair-share standing (policy, teams, quotas, decayed usage)
TEAM_PAGE_QUERIES = 21
# session, user, groups, pending requests, quotas, capacity, policy, unread-notice count
QUEUE_QUERIES = 8


def _grow(world: World, n: int) -> None:
    for i in range(n):
        accelerator_type = AcceleratorTypeFactory(name=f"X{i}")
        QuotaFactory(team=world.team, accelerator_type=accelerator_type, guaranteed=0)
        QuotaRequestFactory(team=world.team, accelerator_type=accelerator_type, requested_by=world.lead, guaranteed=0)
        QuotaRequestFactory(
            team=world.team,
            accelerator_type=accelerator_type,
            requested_by=world.member,
            state="rejected",
            decided_by=world.admin,
        )
        other = TeamFactory()
        QuotaRequestFactory(team=other, accelerator_type=world.h100, requested_by=world.outsider, guaranteed=0)


@pytest.mark.parametrize("rows", [1, 6])
def test_the_team_page_costs_a_fixed_number_of_queries(
    world: World, django_assert_num_queries: object, rows: int
) -> None:
    _grow(world, rows)
    client = client_for(world.lead)
    with django_assert_num_queries(TEAM_PAGE_QUERIES):  # type: ignore[operator]
        response = client.get("/teams/language-models/")
    assert response.status_code == 200


@pytest.mark.parametrize("rows", [1, 6])
def test_the_approval_queue_costs_a_fixed_number_of_queries(
    world: World, django_assert_num_queries: object, rows: int
) -> None:
    _grow(world, rows)
    client = client_for(world.admin)
    with django_assert_num_queries(QUEUE_QUERIES):  # type: ignore[operator]
        response = client.get("/admin-portal/quota-requests/")
    assert response.status_code == 200
    assert response.content.decode().count('class="card request"') == 2 * rows
