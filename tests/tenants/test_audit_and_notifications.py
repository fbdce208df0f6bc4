"""The audit log (filtered, paginated) and the user's in-app notices."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from django.core import mail
from django.test import Client

from tenants.context_processors import tenants_nav
from tenants.models import AuditEvent, Notification
from tenants.services import audit_record, notification_send, quota_request_approve, quota_request_submit
from tests.factories import QuotaRequestFactory, UserFactory
from tests.tenants.conftest import World, client_for

pytestmark = pytest.mark.django_db


def _event(world: World, kind: str, team: object, label: str) -> AuditEvent:
    return audit_record(actor=world.admin, kind=kind, team=team, object_repr=label)  # type: ignore[arg-type]


def test_the_audit_log_filters_by_kind_and_team(world: World) -> None:
    _event(world, AuditEvent.Kind.QUOTA_REQUEST_APPROVED, world.team, "lm-approved")
    _event(world, AuditEvent.Kind.QUOTA_REQUEST_REJECTED, world.team, "lm-rejected")
    _event(world, AuditEvent.Kind.QUOTA_REQUEST_APPROVED, world.other_team, "vision-approved")
    _event(world, AuditEvent.Kind.FLEET_POLICY_UPDATED, None, "policy-changed")
    client = client_for(world.admin)

    everything = client.get("/admin-portal/audit/").content.decode()
    assert all(x in everything for x in ["lm-approved", "lm-rejected", "vision-approved", "policy-changed"])

    by_team = client.get("/admin-portal/audit/", {"team": "language-models"}).content.decode()
    assert "lm-approved" in by_team and "lm-rejected" in by_team
    assert "vision-approved" not in by_team and "policy-changed" not in by_team

    both = client.get("/admin-portal/audit/", {"team": "language-models", "kind": "quota_request.approved"})
    body = both.content.decode()
    assert "lm-approved" in body and "lm-rejected" not in body and "vision-approved" not in body


def test_an_unknown_filter_value_shows_everything_rather_than_failing(world: World) -> None:
    _event(world, AuditEvent.Kind.FLEET_POLICY_UPDATED, None, "policy-changed")
    response = client_for(world.admin).get("/admin-portal/audit/", {"kind": "nonsense"})
    assert response.status_code == 200
    assert "policy-changed" in response.content.decode()


def test_the_audit_log_is_paginated_and_keeps_the_filter_across_pages(world: World) -> None:
    for i in range(55):
        _event(world, AuditEvent.Kind.QUOTA_REQUEST_SUBMITTED, world.team, f"event-{i:02d}")
    client = client_for(world.admin)
    first = client.get("/admin-portal/audit/", {"team": "language-models"}).content.decode()
    assert "event-54" in first and "event-04" not in first
    assert "Page 1 of 2" in first and "team=language-models&amp;page=2" in first
    second = client.get("/admin-portal/audit/", {"team": "language-models", "page": "2"}).content.decode()
    assert "event-04" in second and "event-54" not in second


def test_submitting_a_request_is_audited_with_the_team(world: World) -> None:
    quota_request_submit(
        user=world.lead,
        team=world.team,
        accelerator_type=world.h100,
        guaranteed=8,
        borrow_limit=None,
        lend_limit=None,
        justification="Fine-tuning for search.",
    )
    event = AuditEvent.objects.get()
    assert event.kind == "quota_request.submitted" and event.team == world.team and event.actor == world.lead
    assert event.after["guaranteed"] == 8 and event.after["state"] == "pending"


def test_users_see_only_their_own_notices(world: World) -> None:
    notification_send(user=world.lead, message="For the lead", url="/teams/language-models/")
    notification_send(user=world.member, message="For the member")
    body = client_for(world.lead).get("/notifications/").content.decode()
    assert "For the lead" in body and "For the member" not in body


def test_marking_one_notice_read_leaves_the_others(world: World) -> None:
    first = notification_send(user=world.lead, message="one")
    notification_send(user=world.lead, message="two")
    client_for(world.lead).post("/notifications/read/", {"id": str(first.pk)})
    assert list(Notification.objects.filter(read=True).values_list("message", flat=True)) == ["one"]


def test_marking_all_read_touches_only_the_users_notices(world: World) -> None:
    notification_send(user=world.lead, message="one")
    notification_send(user=world.lead, message="two")
    theirs = notification_send(user=world.member, message="not yours")
    client_for(world.lead).post("/notifications/read/")
    assert Notification.objects.filter(user=world.lead, read=False).count() == 0
    theirs.refresh_from_db()
    assert theirs.read is False


def test_nobody_marks_someone_elses_notice_read(world: World) -> None:
    theirs = notification_send(user=world.member, message="not yours")
    response = client_for(world.outsider).post("/notifications/read/", {"id": str(theirs.pk)})
    assert response.status_code == 302
    theirs.refresh_from_db()
    assert theirs.read is False


def test_notification_pages_need_a_login(world: World) -> None:
    assert Client().get("/notifications/").status_code == 302
    assert Client().post("/notifications/read/").status_code == 302


def test_the_nav_context_counts_unread_notices_and_knows_the_roles(world: World, rf: object) -> None:
    notification_send(user=world.lead, message="one")
    notification_send(user=world.lead, message="two")
    request = rf.get("/")  # type: ignore[attr-defined]
    request.user = world.lead
    nav = tenants_nav(request)["tenants_nav"]
    assert (nav.unread_count, nav.is_fleet_admin, nav.is_finance) == (2, False, False)
    request.user = world.finance
    assert tenants_nav(request)["tenants_nav"].is_finance is True
    request.user = world.admin
    assert tenants_nav(request)["tenants_nav"].is_fleet_admin is True


def test_with_the_context_processor_the_nav_shows_the_unread_count_and_admin_links(
    world: World, settings: object
) -> None:
    templates = settings.TEMPLATES  # type: ignore[attr-defined]
    options = {**templates[0]["OPTIONS"]}
    options["context_processors"] = [*options["context_processors"], "tenants.context_processors.tenants_nav"]
    settings.TEMPLATES = [{**templates[0], "OPTIONS": options}]  # type: ignore[attr-defined]
    notification_send(user=world.lead, message="one")
    lead_page = client_for(world.lead).get("/teams/").content.decode()
    assert 'id="unread-count" aria-label="unread">1</span>' in lead_page
    assert "/admin-portal/quota-requests/" not in lead_page
    admin_page = client_for(world.admin).get("/teams/").content.decode()
    assert "/admin-portal/quota-requests/" in admin_page
    finance_page = client_for(world.finance).get("/notifications/").content.decode()
    assert 'href="/teams/"' not in finance_page
    assert UserFactory  # the superuser path is covered in the approval tests


@pytest.fixture
def mail_dir(tmp_path: Path) -> Path:
    return tmp_path / "mail"


@pytest.fixture
def subprocess_env(subprocess_env: dict[str, str], mail_dir: Path) -> dict[str, str]:
    """The worker writes the mail it sends into files in ``mail_dir``."""
    backend = "django.core.mail.backends.filebased.EmailBackend"
    return {**subprocess_env, "EMAIL_BACKEND": backend, "EMAIL_FILE_PATH": str(mail_dir)}


_MAIL_END = "-" * 79 + "\n"


def _mail_in(directory: Path, *, timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        files = sorted(directory.glob("*.log")) if directory.exists() else []
        texts = [f.read_text() for f in files]
        # The file backend creates the file before it writes the message: wait for its closing rule.
        if texts and all(text.endswith(_MAIL_END) for text in texts):
            return texts
        time.sleep(0.1)
    return []


@pytest.mark.django_db(transaction=True)
def test_a_quota_decision_is_mailed_by_a_worker_after_commit_not_by_the_request(
    world: World, celery_worker_process: subprocess.Popen[bytes], mail_dir: Path
) -> None:
    pending = QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead, guaranteed=8)

    quota_request_approve(admin=world.admin, quota_request_id=pending.pk, note="Go ahead.")

    assert mail.outbox == []  # nothing was sent from this process
    sent = _mail_in(mail_dir, timeout_s=30)
    assert len(sent) == 1
    assert "To: lead@example.com" in sent[0]
    assert "Subject: [Fleetline] Quota request approved" in sent[0]
    assert "Note: Go ahead." in sent[0]


@pytest.mark.django_db(transaction=True)
def test_a_new_notice_reaches_the_users_open_sockets_with_the_unread_count(world: World) -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from core.groups import user_group

    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(world.lead.pk), channel)
    try:
        notification_send(user=world.lead, message="Your quota request was approved", url="/teams/language-models/")
        message = async_to_sync(layer.receive)(channel)
    finally:
        async_to_sync(layer.group_discard)(user_group(world.lead.pk), channel)
    assert message["payload"] == {
        "v": 1,
        "kind": "notice",
        "message": "Your quota request was approved",
        "url": "/teams/language-models/",
        "unread": 1,
    }
