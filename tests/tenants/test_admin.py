"""The Django admin is for reading governed models: a superuser can look at quotas, jobs, nodes,
the policy and the audit log there but not write them, so every write goes through the portal's
checked and audited services. Teams stay editable (within bounds) and memberships change through
the membership services."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import Model
from django.test import Client
from django.urls import reverse

from core.groups import ACCESS_CHANGED, user_group
from scheduling.models import (
    AcceleratorType,
    Allocation,
    FleetClock,
    FleetSample,
    Incident,
    Job,
    Node,
    Pod,
    Rack,
    SchedulerEvent,
    ServingDeployment,
    UsageSample,
)
from tenants.models import (
    AuditEvent,
    FleetPolicy,
    Membership,
    Notification,
    NotificationPreference,
    PriorityClass,
    Quota,
    QuotaRequest,
    Team,
)
from tests.factories import MembershipFactory, UserFactory
from tests.scheduling.conftest import Fleet, build_fleet

GOVERNED = [
    AcceleratorType,
    Pod,
    Rack,
    Node,
    Job,
    ServingDeployment,
    SchedulerEvent,
    FleetClock,
    UsageSample,
    FleetSample,
    Incident,
    Quota,
    QuotaRequest,
    PriorityClass,
    FleetPolicy,
    AuditEvent,
    Notification,
    NotificationPreference,
]


@pytest.fixture
def fleet(db: None) -> Fleet:
    return build_fleet()


@pytest.fixture
def superuser(db: None) -> Client:
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


def _url(model: type[Model], view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _change_form(client: Client, model: type[Model], pk: int, **changes: Any) -> dict[str, Any]:
    """The fields the change form would post, with ``changes`` applied."""
    instance = model._default_manager.get(pk=pk)
    data = {f.name: f.value_from_object(instance) for f in model._meta.concrete_fields if f.name != "id"}
    data.update(changes)
    return {k: ("" if v is None else v) for k, v in data.items()}


@pytest.mark.parametrize("model", GOVERNED, ids=lambda m: m.__name__)
def test_a_superuser_can_add_change_or_delete_no_governed_model_in_the_admin(model: type[Model]) -> None:
    model_admin = admin.site._registry[model]
    request = type("Request", (), {"user": User(is_superuser=True, is_staff=True, is_active=True)})()

    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
    assert model_admin.has_view_permission(request)


@pytest.mark.parametrize("model", GOVERNED, ids=lambda m: m.__name__)
def test_every_governed_list_in_the_admin_is_readable_and_says_where_changes_are_made(
    fleet: Fleet, superuser: Client, model: type[Model]
) -> None:
    response = superuser.get(_url(model, "changelist"))

    assert response.status_code == 200
    assert 'id="governed-note"' in response.content.decode()


def test_posting_a_huge_guarantee_to_a_quota_change_form_changes_nothing(fleet: Fleet, superuser: Client) -> None:
    quota = Quota.objects.get(team=fleet.team)
    before = (quota.guaranteed, quota.updated_at)
    audited = AuditEvent.objects.count()

    response = superuser.post(
        _url(Quota, "change", quota.pk), _change_form(superuser, Quota, quota.pk, guaranteed=9999)
    )

    assert response.status_code == 403
    quota.refresh_from_db()
    assert (quota.guaranteed, quota.updated_at) == before
    assert AuditEvent.objects.count() == audited


def test_a_quota_page_in_the_admin_shows_the_quota_and_points_to_the_quota_queue(
    fleet: Fleet, superuser: Client
) -> None:
    quota = Quota.objects.get(team=fleet.team)

    html = superuser.get(_url(Quota, "change", quota.pk)).content.decode()

    assert 'id="governed-note"' in html
    assert f'href="{reverse("tenants:quota_queue")}"' in html
    assert 'name="_save"' not in html


def test_audit_events_cannot_be_added_or_deleted_by_hand(fleet: Fleet, superuser: Client) -> None:
    audited = AuditEvent.objects.count()

    assert superuser.get(_url(AuditEvent, "add")).status_code == 403
    response = superuser.post(_url(AuditEvent, "add"), {"kind": "fleet_policy.updated", "object_repr": "forged"})

    assert response.status_code == 403
    assert AuditEvent.objects.count() == audited


def test_a_job_state_and_its_allocations_cannot_be_edited_in_the_admin(fleet: Fleet, superuser: Client) -> None:
    job = fleet.submit(gpus=8, name="running-job")
    fleet.tick()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    allocations = list(Allocation.objects.filter(job=job).values_list("node_id", "gpus"))

    response = superuser.post(_url(Job, "change", job.pk), _change_form(superuser, Job, job.pk, state="completed"))
    assert response.status_code == 403
    assert superuser.post(_url(Job, "delete", job.pk), {"post": "yes"}).status_code == 403

    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    assert list(Allocation.objects.filter(job=job).values_list("node_id", "gpus")) == allocations


def test_nodes_and_the_policy_cannot_be_edited_in_the_admin(fleet: Fleet, superuser: Client) -> None:
    node = fleet.nodes[0]
    policy = FleetPolicy.objects.get()

    node_response = superuser.post(_url(Node, "change", node.pk), _change_form(superuser, Node, node.pk, gpus=4096))
    policy_response = superuser.post(
        _url(FleetPolicy, "change", policy.pk), _change_form(superuser, FleetPolicy, policy.pk, backfill=False)
    )

    assert (node_response.status_code, policy_response.status_code) == (403, 403)
    node.refresh_from_db()
    policy.refresh_from_db()
    assert (node.gpus, policy.backfill) == (8, True)


def test_the_team_page_in_the_admin_shows_quotas_and_members_without_letting_them_change(
    fleet: Fleet, superuser: Client
) -> None:
    MembershipFactory(team=fleet.team)

    response = superuser.get(_url(Team, "change", fleet.team.pk))

    assert response.status_code == 200
    for formset in response.context["inline_admin_formsets"]:
        assert not formset.has_add_permission
        assert not formset.has_change_permission
        assert not formset.has_delete_permission


def test_a_team_fair_share_weight_outside_its_bounds_is_refused(fleet: Fleet, superuser: Client) -> None:
    data = {
        "department": fleet.team.department_id,
        "name": fleet.team.name,
        "slug": fleet.team.slug,
        "fairshare_weight": "1e300",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "quotas-TOTAL_FORMS": "1",
        "quotas-INITIAL_FORMS": "1",
    }

    response = superuser.post(_url(Team, "change", fleet.team.pk), data)

    assert response.status_code == 200
    assert "at most 1000" in response.content.decode()
    fleet.team.refresh_from_db()
    assert fleet.team.fairshare_weight == 1.0


def test_teams_cannot_be_deleted_in_the_admin(fleet: Fleet, superuser: Client) -> None:
    assert superuser.post(_url(Team, "delete", fleet.team.pk), {"post": "yes"}).status_code == 403
    assert Team.objects.filter(pk=fleet.team.pk).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("children_disconnected")
def test_removing_a_membership_in_the_admin_tells_the_users_open_sockets(superuser: Client) -> None:
    membership = MembershipFactory()
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(membership.user_id), channel)

    response = superuser.post(_url(Membership, "delete", membership.pk), {"post": "yes"})

    assert response.status_code == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()
    assert async_to_sync(layer.receive)(channel) == {"type": ACCESS_CHANGED}
    async_to_sync(layer.group_discard)(user_group(membership.user_id), channel)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("children_disconnected")
def test_adding_a_membership_in_the_admin_tells_the_users_open_sockets(superuser: Client) -> None:
    other = MembershipFactory()
    user = UserFactory()
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(user.pk), channel)

    response = superuser.post(
        _url(Membership, "add"), {"team": other.team_id, "user": user.pk, "role": Membership.Role.LEAD}
    )

    assert response.status_code == 302
    assert Membership.objects.get(user=user).role == Membership.Role.LEAD
    assert async_to_sync(layer.receive)(channel) == {"type": ACCESS_CHANGED}
    async_to_sync(layer.group_discard)(user_group(user.pk), channel)


def test_a_team_is_still_renamed_and_reweighted_in_the_admin(fleet: Fleet, superuser: Client) -> None:
    quota = Quota.objects.get(team=fleet.team)
    data = {
        "department": fleet.team.department_id,
        "name": "Language Models West",
        "slug": fleet.team.slug,
        "fairshare_weight": "2.5",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "quotas-TOTAL_FORMS": "1",
        "quotas-INITIAL_FORMS": "1",
        # A forged inline row: the quota inline is read-only, so this is ignored.
        "quotas-0-id": str(quota.pk),
        "quotas-0-team": str(fleet.team.pk),
        "quotas-0-guaranteed": "9999",
    }

    response = superuser.post(_url(Team, "change", fleet.team.pk), data)

    assert response.status_code == 302
    fleet.team.refresh_from_db()
    quota.refresh_from_db()
    assert (fleet.team.name, fleet.team.fairshare_weight) == ("Language Models West", 2.5)
    assert quota.guaranteed == 16
