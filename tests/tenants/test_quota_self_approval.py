"""A fleet admin who is also a team's lead does not approve their own quota request while another
fleet admin can; as the fleet's one admin they may, and the approval is marked self-approved."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

from tenants.models import AuditEvent, Quota, QuotaRequest
from tenants.roles import FLEET_ADMIN
from tenants.services import quota_request_approve, quota_request_reject
from tests.factories import QuotaRequestFactory
from tests.tenants.conftest import World, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_request(world: World) -> QuotaRequest:
    """The team's lead is a fleet admin too, and files a request for the team."""
    world.lead.groups.add(Group.objects.get(name=FLEET_ADMIN))
    return QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead, guaranteed=16)


def test_it_refuses_an_admin_approving_their_own_request_while_another_admin_can(
    world: World, own_request: QuotaRequest
) -> None:
    with pytest.raises(PermissionDenied, match="another fleet admin must approve it"):
        quota_request_approve(admin=world.lead, quota_request_id=own_request.pk)

    own_request.refresh_from_db()
    assert own_request.state == QuotaRequest.State.PENDING
    assert not Quota.objects.exists()
    assert not AuditEvent.objects.filter(kind__startswith="quota_request.").exclude(kind="quota_request.submitted")


def test_the_queue_page_says_why_and_keeps_the_request_pending(world: World, own_request: QuotaRequest) -> None:
    client = client_for(world.lead)
    assert "You filed this request" in client.get("/admin-portal/quota-requests/").content.decode()

    response = client.post(f"/admin-portal/quota-requests/{own_request.pk}/approve/", {"note": ""}, follow=True)

    assert "another fleet admin must approve it" in response.content.decode()
    own_request.refresh_from_db()
    assert own_request.state == QuotaRequest.State.PENDING


def test_the_api_answers_403_to_an_admin_approving_their_own_request(world: World, own_request: QuotaRequest) -> None:
    response = client_for(world.lead).post(f"/api/v1/quota-requests/{own_request.pk}/approve/", {})
    assert response.status_code == 403


def test_the_other_admin_approves_it_as_usual(world: World, own_request: QuotaRequest) -> None:
    quota_request_approve(admin=world.admin, quota_request_id=own_request.pk)

    own_request.refresh_from_db()
    assert (own_request.state, own_request.decided_by, own_request.self_approved) == ("approved", world.admin, False)
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_REQUEST_APPROVED).count() == 1


def test_an_admin_may_reject_their_own_request_which_grants_nothing(world: World, own_request: QuotaRequest) -> None:
    quota_request_reject(admin=world.lead, quota_request_id=own_request.pk, note="Filed by mistake.")
    own_request.refresh_from_db()
    assert own_request.state == QuotaRequest.State.REJECTED


@pytest.mark.parametrize("other_admin_gone", ["demoted", "deactivated"])
def test_the_fleets_one_admin_approves_their_own_request_marked_self_approved(
    world: World, own_request: QuotaRequest, other_admin_gone: str
) -> None:
    if other_admin_gone == "demoted":
        world.admin.groups.clear()
    else:
        world.admin.is_active = False
        world.admin.save()

    quota_request_approve(admin=world.lead, quota_request_id=own_request.pk)

    own_request.refresh_from_db()
    assert (own_request.state, own_request.decided_by, own_request.self_approved) == ("approved", world.lead, True)
    assert Quota.objects.get(team=world.team, accelerator_type=world.h100).guaranteed == 16
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_REQUEST_SELF_APPROVED)
    assert event.actor == world.lead and event.team == world.team and event.after["self_approved"] is True
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_REQUEST_APPROVED).exists()


def test_a_self_approval_is_shown_on_the_team_page_the_api_and_the_audit_log(
    world: World, own_request: QuotaRequest
) -> None:
    world.admin.groups.clear()
    quota_request_approve(admin=world.lead, quota_request_id=own_request.pk)
    client = client_for(world.lead)

    team_page = client.get("/teams/language-models/").content.decode()
    api = client.get(f"/api/v1/quota-requests/{own_request.pk}/").json()
    audit = client.get("/admin-portal/audit/", {"kind": "quota_request.self_approved"}).content.decode()

    assert "(self-approved)" in team_page
    assert api["self_approved"] is True
    assert "Quota request self-approved" in audit and "Language Models · H100 quota" in audit
