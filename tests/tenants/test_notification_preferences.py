"""Per-user notification preferences: defaults, the settings page, and the quota decisions and
budget alerts that follow them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client, TestCase

from tenants.models import NoticeKind, Notification, NotificationPreference
from tenants.selectors import NOTICE_DEFAULTS, NoticeChannels, notification_preferences_for_user
from tenants.services import notice_deliver, notification_preferences_save, quota_request_approve
from tests.factories import QuotaRequestFactory
from tests.tenants.conftest import World, client_for


def test_defaults_tell_in_the_app_of_everything_and_mail_what_asks_for_action(world: World) -> None:
    preferences = notification_preferences_for_user(user=world.lead)
    assert all(channels.in_app for channels in preferences.values())
    mailed = {kind for kind, channels in preferences.items() if channels.email}
    assert mailed == {NoticeKind.JOB_FAILED, NoticeKind.JOB_PREEMPTED, NoticeKind.QUOTA, NoticeKind.BUDGET}
    assert set(preferences) == set(NoticeKind.values) == set(NOTICE_DEFAULTS)


def test_saving_twice_keeps_one_row_per_kind_and_the_latest_choice(world: World) -> None:
    notification_preferences_save(user=world.lead, choices={NoticeKind.QUOTA: NoticeChannels(False, True)})
    notification_preferences_save(user=world.lead, choices={NoticeKind.QUOTA: NoticeChannels(True, False)})
    assert NotificationPreference.objects.filter(user=world.lead).count() == 1
    assert notification_preferences_for_user(user=world.lead)[NoticeKind.QUOTA] == NoticeChannels(True, False)
    assert notification_preferences_for_user(user=world.member)[NoticeKind.QUOTA] == NoticeChannels(True, True)


def test_an_unknown_kind_is_refused_by_name(world: World) -> None:
    with pytest.raises(ValidationError, match="Unknown kind of notice: job_exploded"):
        notification_preferences_save(user=world.lead, choices={"job_exploded": NoticeChannels(True, True)})


def test_the_settings_page_shows_the_defaults_ticked_and_saves_every_box(world: World) -> None:
    client = client_for(world.member)
    page = client.get("/settings/notifications/").content.decode()
    assert 'name="job_failed__email" id="id_job_failed__email" checked' in page
    assert 'name="job_started__email" id="id_job_started__email">' in page
    assert "has no e-mail address" in page
    assert 'href="/settings/tokens/"' in page

    ticked = {"job_started__in_app": "on", "job_started__email": "on", "quota__in_app": "on"}
    response = client.post("/settings/notifications/", ticked)
    assert response.status_code == 302
    saved = notification_preferences_for_user(user=world.member)
    assert saved[NoticeKind.JOB_STARTED] == NoticeChannels(True, True)
    assert saved[NoticeKind.QUOTA] == NoticeChannels(True, False)
    assert saved[NoticeKind.JOB_FAILED] == NoticeChannels(False, False)  # unticked boxes are off
    assert notification_preferences_for_user(user=world.lead) == NOTICE_DEFAULTS  # only their own


def test_the_settings_page_asks_to_sign_in(world: World) -> None:
    response = Client().get("/settings/notifications/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def _mails_queued(callbacks: list[Callable[[], object]]) -> int:
    return sum(1 for callback in callbacks if "tenants.tasks.notification_email" in repr(callback))


def test_a_quota_decision_follows_the_requesters_choice(world: World) -> None:
    notification_preferences_save(user=world.lead, choices={NoticeKind.QUOTA: NoticeChannels(False, False)})
    pending = QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead, guaranteed=8)
    with TestCase.captureOnCommitCallbacks() as callbacks:
        quota_request_approve(admin=world.admin, quota_request_id=pending.pk, note="Go ahead.")
    assert not Notification.objects.filter(user=world.lead).exists()
    assert _mails_queued(callbacks) == 0


def test_notice_deliver_queues_the_mail_only_when_wanted_and_addressed(world: World) -> None:
    def queued(user: User, kind: NoticeKind) -> int:
        with TestCase.captureOnCommitCallbacks() as callbacks:
            notice_deliver(user=user, kind=kind, message="m", subject="s")
        return _mails_queued(callbacks)

    assert queued(world.lead, NoticeKind.BUDGET) == 1
    assert queued(world.lead, NoticeKind.JOB_STARTED) == 0  # off by default
    assert queued(world.member, NoticeKind.BUDGET) == 0  # no address
    notification_preferences_save(user=world.lead, choices={NoticeKind.BUDGET: NoticeChannels(True, False)})
    assert queued(world.lead, NoticeKind.BUDGET) == 0
    assert Notification.objects.filter(user=world.lead, kind=NoticeKind.BUDGET).count() == 2
