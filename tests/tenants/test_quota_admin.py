"""Fleet admins set a team's quota directly: the service, the team page's form, and what the
scheduler reads afterwards."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection

from scheduling.convert import UNLIMITED
from scheduling.cycle.snapshot import snapshot_build
from tenants.models import AuditEvent, Notification, Quota
from tenants.services import quota_request_approve, quota_set
from tests.factories import FleetPolicyFactory, MembershipFactory, QuotaFactory, QuotaRequestFactory
from tests.tenants.conftest import World, client_for

pytestmark = pytest.mark.django_db


def _set(world: World, **overrides: Any) -> Quota:
    values: dict[str, Any] = {
        "admin": world.admin,
        "team": world.team,
        "accelerator_type": world.h100,
        "guaranteed": 16,
        "borrow_limit": 8,
        "lend_limit": None,
        "reason": "Launch of the new model family.",
    }
    values.update(overrides)
    return quota_set(**values)


def _quota_fields(world: World) -> tuple[int, int | None, int | None] | None:
    quota = Quota.objects.filter(team=world.team, accelerator_type=world.h100).first()
    return (quota.guaranteed, quota.borrow_limit, quota.lend_limit) if quota else None


def test_an_admin_sets_a_new_quota_audited_and_the_leads_are_told(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    second_lead = MembershipFactory(team=world.team, role="lead").user

    with django_capture_on_commit_callbacks() as callbacks:
        quota = _set(world)

    assert _quota_fields(world) == (16, 8, None) and quota.pk
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_SET)
    assert (event.actor, event.team, event.before) == (world.admin, world.team, None)
    assert event.after == {"guaranteed": 16, "borrow_limit": 8, "lend_limit": None}
    assert "Launch of the new model family." in event.object_repr
    told = set(Notification.objects.values_list("user_id", flat=True))
    assert told == {world.lead.pk, second_lead.pk}  # the leads, not the member
    notice = Notification.objects.get(user=world.lead)
    assert "16 guaranteed GPUs" in notice.message and "borrow limit 8, lend limit unlimited" in notice.message
    assert notice.url == "/teams/language-models/"
    # A worker mails the leads who have an address, once the change commits.
    mails = [c.keywords for c in callbacks if isinstance(c, partial) and "subject" in c.keywords]
    assert mails == [
        {"to": ["lead@example.com"], "subject": "[Fleetline] Language Models quota changed", "message": notice.message}
    ]


def test_changing_a_quota_records_before_and_after(world: World) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=4, borrow_limit=None, lend_limit=2)

    _set(world, guaranteed=10, borrow_limit=None, lend_limit=None)

    assert _quota_fields(world) == (10, None, None)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_SET)
    assert event.before == {"guaranteed": 4, "borrow_limit": None, "lend_limit": 2}
    assert event.after == {"guaranteed": 10, "borrow_limit": None, "lend_limit": None}


def test_a_quota_set_to_nothing_keeps_its_row(world: World) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=4, borrow_limit=2, lend_limit=2)

    _set(world, guaranteed=0, borrow_limit=None, lend_limit=None)

    assert _quota_fields(world) == (0, None, None)


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance"])
def test_only_fleet_admins_set_quotas(world: World, who: str) -> None:
    with pytest.raises(PermissionDenied):
        _set(world, admin=getattr(world, who))

    assert _quota_fields(world) is None
    assert not AuditEvent.objects.exists() and not Notification.objects.exists()


def test_a_guarantee_beyond_fleet_capacity_is_refused_and_nothing_changes(world: World) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=4)
    QuotaFactory(team=world.other_team, accelerator_type=world.h100, guaranteed=20)

    with pytest.raises(ValidationError, match=r"Guarantees for H100 would total 33 of 32 GPUs \(overcommit ratio 1\)"):
        _set(world, guaranteed=13)

    assert _quota_fields(world) == (4, None, None)
    assert not AuditEvent.objects.exists() and not Notification.objects.exists()


def test_the_overcommit_ratio_makes_room(world: World) -> None:
    FleetPolicyFactory(guarantee_overcommit_ratio=1.5)

    _set(world, guaranteed=48)

    assert _quota_fields(world) == (48, 8, None)


def test_shrinking_a_guarantee_is_allowed_even_when_the_fleet_is_overcommitted(world: World) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=30)
    QuotaFactory(team=world.other_team, accelerator_type=world.h100, guaranteed=30)

    _set(world, guaranteed=20)

    assert _quota_fields(world) == (20, 8, None)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"guaranteed": -1}, "guaranteed"),
        ({"borrow_limit": -1}, "borrow_limit"),
        ({"lend_limit": -3}, "lend_limit"),
        ({"reason": "   "}, "reason"),
        ({"reason": "x" * 2001}, "reason"),
    ],
)
def test_bad_values_are_refused_by_field_and_nothing_changes(
    world: World, overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        _set(world, **overrides)

    assert field in refused.value.message_dict
    assert _quota_fields(world) is None and not AuditEvent.objects.exists()


def test_the_scheduler_reads_the_new_quota_at_its_next_tick(world: World) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=4, borrow_limit=0)

    _set(world, guaranteed=24, borrow_limit=None, lend_limit=6)

    quotas = {(q.team, q.accelerator): q for q in snapshot_build(sim_now_s=0.0).quotas}
    seen = quotas[(str(world.team.pk), "H100")]
    assert (seen.guaranteed, seen.borrow_limit, seen.lend_limit) == (24, UNLIMITED, 6)


# The team page -----------------------------------------------------------------------------------


def _form_url(world: World) -> str:
    return "/teams/language-models/quotas/H100/"


def _form(**overrides: str) -> dict[str, str]:
    return {"guaranteed": "12", "borrow_limit": "", "lend_limit": "4", "reason": "Rebalance after review.", **overrides}


def test_the_team_page_shows_fleet_admins_a_quota_form_per_accelerator_type(world: World) -> None:
    body = client_for(world.admin).get("/teams/language-models/").content.decode()

    assert 'id="quota-admin"' in body
    assert f'action="{_form_url(world)}"' in body
    assert 'action="/teams/language-models/quotas/A100/"' in body
    assert f"/quotas/{world.h100.pk}/" not in body  # the URLs name types, never number them


@pytest.mark.parametrize("who", ["lead", "member"])
def test_the_team_page_has_no_quota_form_for_anyone_else(world: World, who: str) -> None:
    body = client_for(getattr(world, who)).get("/teams/language-models/").content.decode()

    assert 'id="quota-admin"' not in body


def test_an_admin_sets_a_quota_from_the_team_page(world: World) -> None:
    client = client_for(world.admin)

    response = client.post(_form_url(world), _form())

    assert response.status_code == 302 and response["Location"] == "/teams/language-models/"
    assert _quota_fields(world) == (12, None, 4)
    page = client.get("/teams/language-models/").content.decode()
    assert "Quota for H100 set" in page


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance"])
def test_the_quota_form_answers_404_to_anyone_but_fleet_admins(world: World, who: str) -> None:
    response = client_for(getattr(world, who)).post(_form_url(world), _form())

    assert response.status_code == 404
    assert _quota_fields(world) is None


def test_an_unknown_accelerator_type_is_a_404(world: World) -> None:
    client = client_for(world.admin)
    for url in ("/teams/language-models/quotas/TPUv9/", f"/teams/language-models/quotas/{world.h100.pk}/"):
        assert client.post(url, _form()).status_code == 404
    assert _quota_fields(world) is None


def test_the_page_says_why_a_quota_is_refused_and_changes_nothing(world: World) -> None:
    client = client_for(world.admin)

    over = client.post(_form_url(world), _form(guaranteed="40"), follow=True).content.decode()
    blank = client.post(_form_url(world), _form(reason=""), follow=True).content.decode()
    negative = client.post(_form_url(world), _form(lend_limit="-1"), follow=True).content.decode()

    assert "Guarantees for H100 would total 40 of 32 GPUs" in over
    assert "Reason: This field is required." in blank
    assert "Lend limit: Ensure this value is greater than or equal to 0." in negative
    assert _quota_fields(world) is None and not AuditEvent.objects.exists()


def test_the_quota_form_only_takes_posts(world: World) -> None:
    assert client_for(world.admin).get(_form_url(world)).status_code == 405


def test_the_audit_log_shows_a_set_quota_field_by_field(world: World) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=4, borrow_limit=2)
    _set(world, guaranteed=10, borrow_limit=None)

    body = client_for(world.admin).get("/admin-portal/audit/").content.decode()

    assert "Quota set by a fleet admin" in body
    assert "Language Models · H100 quota: Launch of the new model family." in body
    assert '<span class="field">Guaranteed</span>: 4 <span aria-label="changed to">→</span> <strong>10</strong>' in body
    assert (
        '<span class="field">Borrow limit</span>: 2 <span aria-label="changed to">→</span> <strong>unlimited</strong>'
        in body
    )


@pytest.mark.django_db(transaction=True)
def test_a_quota_set_and_an_approval_at_the_same_instant_cannot_both_take_the_last_room(world: World) -> None:
    FleetPolicyFactory()
    pending = QuotaRequestFactory(
        team=world.other_team, accelerator_type=world.h100, requested_by=world.outsider, guaranteed=20
    )
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def run(write: Callable[[], object], name: str) -> None:
        try:
            barrier.wait(timeout=10)
            write()
            outcomes.append(name)
        except ValidationError as exc:
            outcomes.append("refused: " + " ".join(exc.messages))
        finally:
            connection.close()  # each thread has its own connection

    threads = [
        threading.Thread(target=run, args=(lambda: _set(world, guaranteed=20), "set")),
        threading.Thread(
            target=run, args=(lambda: quota_request_approve(admin=world.admin, quota_request_id=pending.pk), "approved")
        ),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(outcomes) == 2
    assert "refused: Guarantees for H100 would total 40 of 32 GPUs (overcommit ratio 1)." in outcomes
    assert sum(Quota.objects.values_list("guaranteed", flat=True)) == 20
