"""The approval queue: who may decide, what approving does, and when it refuses."""

from __future__ import annotations

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError

from tenants.models import AuditEvent, Notification, Quota, QuotaRequest
from tenants.services import quota_request_approve, quota_request_reject
from tests.factories import FleetPolicyFactory, QuotaFactory, QuotaRequestFactory
from tests.tenants.conftest import World, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(world: World) -> QuotaRequest:
    return QuotaRequestFactory(
        team=world.team, accelerator_type=world.h100, requested_by=world.lead, guaranteed=16, borrow_limit=8
    )


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance"])
def test_only_fleet_admins_see_the_queue(world: World, pending: QuotaRequest, who: str) -> None:
    assert client_for(getattr(world, who)).get("/admin-portal/quota-requests/").status_code == 404


def test_the_queue_shows_each_request_with_the_headroom_it_would_leave(world: World, pending: QuotaRequest) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=4)
    QuotaFactory(team=world.other_team, accelerator_type=world.h100, guaranteed=10)
    body = client_for(world.admin).get("/admin-portal/quota-requests/").content.decode()
    assert "Language Models · H100" in body
    assert "(now 4)" in body
    assert "Guarantees for H100 would total 26 of 32 GPUs" in body


def test_a_superuser_is_a_fleet_admin_too(world: World, pending: QuotaRequest) -> None:
    from tests.factories import UserFactory

    root = UserFactory(is_superuser=True, is_staff=True)
    assert client_for(root).get("/admin-portal/quota-requests/").status_code == 200


def test_approving_creates_the_quota_audits_it_and_tells_the_lead(
    world: World, pending: QuotaRequest, django_capture_on_commit_callbacks: object
) -> None:
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        response = client_for(world.admin).post(
            f"/admin-portal/quota-requests/{pending.pk}/approve/", {"note": "Go ahead."}
        )
    assert response.status_code == 302
    quota = Quota.objects.get(team=world.team, accelerator_type=world.h100)
    assert (quota.guaranteed, quota.borrow_limit, quota.lend_limit) == (16, 8, None)
    pending.refresh_from_db()
    assert pending.state == "approved" and pending.decided_by == world.admin and pending.decided_at
    assert pending.decision_note == "Go ahead."
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_REQUEST_APPROVED)
    assert event.actor == world.admin and event.team == world.team
    assert event.before is None
    assert event.after == {"guaranteed": 16, "borrow_limit": 8, "lend_limit": None}
    notice = Notification.objects.get(user=world.lead)
    assert "approved" in notice.message and notice.url == "/teams/language-models/"
    # The email goes from a worker after commit, not from the request (test_audit_and_notifications).
    assert mail.outbox == []


def test_approving_over_an_existing_quota_records_before_and_after(world: World, pending: QuotaRequest) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=4, borrow_limit=None, lend_limit=2)
    quota_request_approve(admin=world.admin, quota_request_id=pending.pk)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_REQUEST_APPROVED)
    assert event.before == {"guaranteed": 4, "borrow_limit": None, "lend_limit": 2}
    assert event.after == {"guaranteed": 16, "borrow_limit": 8, "lend_limit": None}
    assert Quota.objects.get(team=world.team, accelerator_type=world.h100).guaranteed == 16


def test_no_email_is_sent_when_the_lead_has_no_address(world: World, pending: QuotaRequest) -> None:
    world.lead.email = ""
    world.lead.save()
    quota_request_approve(admin=world.admin, quota_request_id=pending.pk)
    assert mail.outbox == []
    assert Notification.objects.filter(user=world.lead).count() == 1


def test_approval_beyond_fleet_capacity_is_refused_and_changes_nothing(world: World, pending: QuotaRequest) -> None:
    QuotaFactory(team=world.other_team, accelerator_type=world.h100, guaranteed=20)
    response = client_for(world.admin).post(f"/admin-portal/quota-requests/{pending.pk}/approve/", follow=True)
    assert "Guarantees for H100 would total 36 of 32 GPUs (overcommit ratio 1)." in response.content.decode()
    pending.refresh_from_db()
    assert pending.state == "pending" and pending.decided_by is None
    assert not Quota.objects.filter(team=world.team).exists()
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_REQUEST_APPROVED).exists()
    assert not Notification.objects.exists()


def test_the_overcommit_ratio_makes_room_for_more_guarantees(world: World, pending: QuotaRequest) -> None:
    FleetPolicyFactory(guarantee_overcommit_ratio=1.5)
    QuotaFactory(team=world.other_team, accelerator_type=world.h100, guaranteed=20)
    quota_request_approve(admin=world.admin, quota_request_id=pending.pk)  # 36 of 48 allowed
    assert Quota.objects.get(team=world.team, accelerator_type=world.h100).guaranteed == 16


def test_the_overcommit_ratio_is_named_in_the_refusal(world: World, pending: QuotaRequest) -> None:
    FleetPolicyFactory(guarantee_overcommit_ratio=1.1)
    QuotaFactory(team=world.other_team, accelerator_type=world.h100, guaranteed=30)
    with pytest.raises(ValidationError, match=r"would total 46 of 32 GPUs \(overcommit ratio 1.1\)"):
        quota_request_approve(admin=world.admin, quota_request_id=pending.pk)


def test_shrinking_a_guarantee_is_allowed_even_when_the_fleet_is_overcommitted(world: World) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=30)
    QuotaFactory(team=world.other_team, accelerator_type=world.h100, guaranteed=30)  # 60 of 32 already
    shrink = QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead, guaranteed=10)
    quota_request_approve(admin=world.admin, quota_request_id=shrink.pk)
    assert Quota.objects.get(team=world.team, accelerator_type=world.h100).guaranteed == 10


def test_guarantees_of_other_accelerator_types_do_not_count(world: World, pending: QuotaRequest) -> None:
    QuotaFactory(team=world.other_team, accelerator_type=world.a100, guaranteed=16)
    quota_request_approve(admin=world.admin, quota_request_id=pending.pk)
    assert pending.__class__.objects.get(pk=pending.pk).state == "approved"


def test_rejecting_needs_a_note_and_is_audited(world: World, pending: QuotaRequest) -> None:
    client = client_for(world.admin)
    response = client.post(f"/admin-portal/quota-requests/{pending.pk}/reject/", {"note": ""}, follow=True)
    assert "Say why the request is rejected." in response.content.decode()
    pending.refresh_from_db()
    assert pending.state == "pending"

    answer = client.post(
        f"/admin-portal/quota-requests/{pending.pk}/reject/", {"note": "Not this quarter."}, follow=True
    )
    assert "Request rejected." in answer.content.decode()
    pending.refresh_from_db()
    assert pending.state == "rejected" and pending.decision_note == "Not this quarter."
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_REQUEST_REJECTED)
    assert event.before == {"state": "pending"}
    assert event.after == {"state": "rejected", "decision_note": "Not this quarter."}
    assert "rejected" in Notification.objects.get(user=world.lead).message
    assert not Quota.objects.exists()


def test_a_decided_request_cannot_be_decided_again(world: World, pending: QuotaRequest) -> None:
    quota_request_reject(admin=world.admin, quota_request_id=pending.pk, note="No.")
    response = client_for(world.admin).post(f"/admin-portal/quota-requests/{pending.pk}/approve/", follow=True)
    assert "This request is already rejected." in response.content.decode()
    assert not Quota.objects.exists()


def test_a_withdrawn_request_cannot_be_approved(world: World, pending: QuotaRequest) -> None:
    QuotaRequest.objects.filter(pk=pending.pk).update(state="withdrawn")
    with pytest.raises(ValidationError, match="already withdrawn"):
        quota_request_approve(admin=world.admin, quota_request_id=pending.pk)


def test_an_unknown_request_is_a_404(world: World) -> None:
    assert client_for(world.admin).post("/admin-portal/quota-requests/999999/approve/").status_code == 404


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance"])
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_only_fleet_admins_may_decide(world: World, pending: QuotaRequest, who: str, decision: str) -> None:
    response = client_for(getattr(world, who)).post(
        f"/admin-portal/quota-requests/{pending.pk}/{decision}/", {"note": "Because I say so."}
    )
    assert response.status_code == 404
    pending.refresh_from_db()
    assert pending.state == "pending"
    assert not Quota.objects.exists()


def test_the_services_refuse_non_admins_too(world: World, pending: QuotaRequest) -> None:
    with pytest.raises(PermissionDenied):
        quota_request_approve(admin=world.lead, quota_request_id=pending.pk)
    with pytest.raises(PermissionDenied):
        quota_request_reject(admin=world.lead, quota_request_id=pending.pk, note="Mine.")


def test_deciding_needs_a_post(world: World, pending: QuotaRequest) -> None:
    assert client_for(world.admin).get(f"/admin-portal/quota-requests/{pending.pk}/approve/").status_code == 405


def test_the_approved_quota_shows_on_the_team_page(world: World, pending: QuotaRequest) -> None:
    quota_request_approve(admin=world.admin, quota_request_id=pending.pk)
    body = client_for(world.member).get("/teams/language-models/").content.decode()
    assert '<td class="num guaranteed">16</td>' in body
    assert "Approved" in body
