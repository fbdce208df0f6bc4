"""Leads add and remove their team's members (audited); only fleet admins appoint or remove
leads; everyone else gets 404s. Admins see every team's quota, use and queue on /teams/."""

from __future__ import annotations

import pytest

from tenants.models import AuditEvent, Membership
from tests.factories import FleetPolicyFactory, QuotaFactory, UserFactory
from tests.tenants.conftest import World, client_for

pytestmark = pytest.mark.django_db


def test_a_lead_adds_a_member_and_the_change_is_audited(world: World) -> None:
    newcomer = UserFactory(username="newcomer")
    response = client_for(world.lead).post("/teams/language-models/members/", {"username": "newcomer"})

    assert response.status_code == 302
    membership = Membership.objects.get(team=world.team, user=newcomer)
    assert membership.role == Membership.Role.MEMBER
    entry = AuditEvent.objects.get(kind=AuditEvent.Kind.MEMBER_ADDED)
    assert entry.actor == world.lead and entry.team == world.team
    assert entry.after == {"user": "newcomer", "role": "member"}


def test_a_lead_cannot_appoint_a_lead(world: World) -> None:
    UserFactory(username="hopeful")
    client_for(world.lead).post("/teams/language-models/members/", {"username": "hopeful", "role": "lead"})
    assert Membership.objects.get(user__username="hopeful").role == Membership.Role.MEMBER


def test_an_unknown_username_is_a_clear_error_and_adds_nobody(world: World) -> None:
    count = Membership.objects.count()
    response = client_for(world.lead).post("/teams/language-models/members/", {"username": "nobody-here"})
    assert response.status_code == 400
    assert "No user is called" in response.content.decode()
    assert Membership.objects.count() == count and not AuditEvent.objects.exists()


def test_adding_someone_twice_says_so(world: World) -> None:
    response = client_for(world.lead).post("/teams/language-models/members/", {"username": world.member.username})
    assert response.status_code == 400
    assert Membership.objects.filter(user=world.member).count() == 1


def test_a_lead_removes_a_member_and_the_removal_is_audited(world: World) -> None:
    membership = Membership.objects.get(user=world.member)
    response = client_for(world.lead).post(f"/teams/language-models/members/{membership.pk}/remove/")

    assert response.status_code == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()
    entry = AuditEvent.objects.get(kind=AuditEvent.Kind.MEMBER_REMOVED)
    assert entry.before == {"user": world.member.username, "role": "member"}


def test_a_lead_cannot_remove_another_lead_but_an_admin_can(world: World) -> None:
    other_lead = Membership.objects.create(team=world.team, user=UserFactory(), role=Membership.Role.LEAD)
    client_for(world.lead).post(f"/teams/language-models/members/{other_lead.pk}/remove/")
    assert Membership.objects.filter(pk=other_lead.pk).exists()

    client_for(world.admin).post(f"/teams/language-models/members/{other_lead.pk}/remove/")
    assert not Membership.objects.filter(pk=other_lead.pk).exists()


def test_an_admin_appoints_a_lead(world: World) -> None:
    UserFactory(username="new-lead")
    client_for(world.admin).post("/teams/language-models/members/", {"username": "new-lead", "role": "lead"})
    assert Membership.objects.get(user__username="new-lead").role == Membership.Role.LEAD


def test_a_member_and_an_outsider_cannot_change_members(world: World) -> None:
    UserFactory(username="walk-in")
    membership = Membership.objects.get(user=world.lead)
    for user in (world.member, world.outsider):
        client = client_for(user)
        assert client.post("/teams/language-models/members/", {"username": "walk-in"}).status_code == 404
        client.post(f"/teams/language-models/members/{membership.pk}/remove/")
    assert not Membership.objects.filter(user__username="walk-in").exists()
    assert Membership.objects.filter(pk=membership.pk).exists()


def test_an_outsider_cannot_remove_a_member_of_another_team_through_their_own(world: World) -> None:
    membership = Membership.objects.get(user=world.member)
    response = client_for(world.outsider).post(f"/teams/vision/members/{membership.pk}/remove/")
    assert response.status_code == 404
    assert Membership.objects.filter(pk=membership.pk).exists()


def test_the_team_page_lists_members_usage_and_fair_share_standing(world: World) -> None:
    page = client_for(world.member).get("/teams/language-models/").content.decode()
    assert world.lead.username in page and world.member.username in page
    assert "Usage over time" in page and "Fair-share standing" in page
    assert 'id="member-add"' not in page  # members do not manage members


@pytest.mark.parametrize(
    ("order", "says"),
    [
        ("shortest_limit", "then the shortest time limit, whatever the team"),
        ("fair_share", "the team that has used least"),
    ],
)
def test_the_team_page_says_how_the_fleet_policy_orders_the_queue(world: World, order: str, says: str) -> None:
    FleetPolicyFactory(queue_order=order)
    page = client_for(world.member).get("/teams/language-models/").content.decode()
    assert says in page


@pytest.mark.parametrize("least_borrowed_first", [True, False])
def test_the_team_page_says_whether_the_borrowers_of_the_teams_that_borrow_least_go_first(
    world: World, least_borrowed_first: bool
) -> None:
    FleetPolicyFactory(least_borrowed_first=least_borrowed_first)
    page = client_for(world.member).get("/teams/language-models/").content.decode()
    assert "Jobs within their team's guarantee go before jobs that would borrow" in page
    assert ("the teams that borrow the fewest GPUs go first" in page) is least_borrowed_first


@pytest.mark.parametrize("after_s", [3600.0, None])
def test_the_team_page_says_whether_a_long_waiting_job_keeps_its_quota(world: World, after_s: float | None) -> None:
    FleetPolicyFactory(quota_hold_after_s=after_s)
    page = client_for(world.member).get("/teams/language-models/").content.decode()
    assert ("keeps its size within the team's quota" in page) is (after_s is not None)
    assert ("has waited 1 h, it keeps" in page) is (after_s is not None)


def test_admins_see_every_teams_quota_use_and_queue_on_the_team_list(world: World) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=16)
    page = client_for(world.admin).get("/teams/").content.decode()
    assert "Guaranteed GPUs" in page and "Pending jobs" in page
    assert 'data-team="language-models"' in page and 'data-team="vision"' in page
    assert '<td class="num">16</td>' in page
    member_page = client_for(world.member).get("/teams/").content.decode()
    assert 'data-team="vision"' not in member_page
