"""Priority classes and the fleet policy: admins only, validated, every save audited."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps

from scheduling import engine
from scheduling.convert import policy_from_row
from tenants.models import AuditEvent, FleetPolicy, PriorityClass
from tests.factories import FleetPolicyFactory, PriorityClassFactory
from tests.tenants.conftest import World, client_for

pytestmark = pytest.mark.django_db

# The policy page speaks days, hours and percentages; the stored values are seconds and ratios.
POLICY = {
    "fairshare_half_life_days": "7",
    "fairshare_age_weight": "1.5",
    "fairshare_max_age_hours": "24",
    "gang_spread_after_hours": "1",
    "guarantee_spread_after_hours": "0",
    "backfill": "on",
    "reservation_depth": "2",
    "preemption": "on",
    "preemption_grace_s": "60",
    "reclaim_after_hours": "1",
    "reclaim_wait_credit": "",
    "reclaim_guaranteed_share_percent": "25",
    "partial_reclaim_young_hours": "2",
    "queue_order": "shortest_limit",
    "within_team_order": "las",
    "topology_penalty_node_percent": "0",
    "topology_penalty_rack_percent": "0",
    "topology_penalty_pod_percent": "20",
    "topology_penalty_fleet_percent": "50",
    "guarantee_overcommit_percent": "100",
    "heartbeat_interval_s": "10",
    "dead_after_missed_heartbeats": "3",
    "slow_threshold_percent": "30",
    "slow_consecutive_steps": "5",
    "charge_model": "usage",
}
CLASS = {"name": "research", "value": "400", "kind": "training", "preemptible": "on"}


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance"])
@pytest.mark.parametrize("url", ["/admin-portal/policy/", "/admin-portal/policy/classes/new/", "/admin-portal/audit/"])
def test_only_fleet_admins_open_the_policy_pages(world: World, who: str, url: str) -> None:
    assert client_for(getattr(world, who)).get(url).status_code == 404
    assert client_for(world.admin).get(url).status_code == 200


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance"])
def test_only_fleet_admins_change_policy_or_classes(world: World, who: str) -> None:
    pc = PriorityClassFactory(name="batch", value=100)
    client = client_for(getattr(world, who))
    assert client.post("/admin-portal/policy/", POLICY).status_code == 404
    assert client.post("/admin-portal/policy/classes/new/", CLASS).status_code == 404
    assert client.post(f"/admin-portal/policy/classes/{pc.pk}/", {**CLASS, "name": "batch"}).status_code == 404
    assert not AuditEvent.objects.exists()
    assert PriorityClass.objects.get().value == 100


def test_an_admin_updates_the_policy_and_only_the_changes_are_audited(world: World) -> None:
    FleetPolicyFactory()
    response = client_for(world.admin).post("/admin-portal/policy/", POLICY)
    assert response.status_code == 302
    policy = FleetPolicy.objects.get()
    assert (policy.reservation_depth, policy.within_team_order, policy.topology_penalty_pod) == (2, "las", 1.2)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.FLEET_POLICY_UPDATED)
    assert event.actor == world.admin
    assert event.before == {
        "fairshare_age_weight": 0.0,
        "fairshare_max_age_s": 3600.0,
        "gang_spread_after_s": 604800.0,
        "reservation_depth": 1,
        "preemption_grace_s": 30.0,
        "queue_order": "fair_share",
        "least_borrowed_first": True,
        "within_team_order": "shortest_limit",
        "topology_penalty_pod": 1.15,
        "topology_penalty_fleet": 1.4,
    }
    assert event.after == {
        "fairshare_age_weight": 1.5,
        "fairshare_max_age_s": 86400.0,
        "gang_spread_after_s": 3600.0,
        "reservation_depth": 2,
        "preemption_grace_s": 60.0,
        "queue_order": "shortest_limit",
        "least_borrowed_first": False,  # its box left unchecked
        "within_team_order": "las",
        "topology_penalty_pod": 1.2,
        "topology_penalty_fleet": 1.5,
    }
    # The next cycle schedules with it.
    engine_policy = policy_from_row(policy)
    assert (engine_policy.age_weight, engine_policy.max_age_s, engine_policy.within_team_order) == (1.5, 86400.0, "las")
    assert engine_policy.gang_spread_after_s == 3600.0
    assert engine_policy.queue_order == "shortest_limit"
    assert engine_policy.least_borrowed_first is False


def test_unchecked_boxes_turn_backfill_and_preemption_off(world: World) -> None:
    data = {k: v for k, v in POLICY.items() if k not in {"backfill", "preemption"}}
    client_for(world.admin).post("/admin-portal/policy/", data)
    policy = FleetPolicy.objects.get()
    assert policy.backfill is False and policy.preemption is False


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("reservation_depth", "0", "Must be between 1 and 16."),
        ("reservation_depth", "", "This field is required"),
        ("topology_penalty_node_percent", "-10", "Must be between 0 and 900 %."),
        ("topology_penalty_rack_percent", "-50", "Must be between 0 and 900 %."),
        ("topology_penalty_pod_percent", "-1", "Must be between 0 and 900 %."),
        ("topology_penalty_fleet_percent", "soon", "Enter a number"),
        ("fairshare_half_life_days", "0", "Must be between 0.1 and 365 days."),
        ("fairshare_half_life_days", "soon", "Enter a number"),
        ("fairshare_age_weight", "-0.5", "Must be between 0 and 100."),
        ("fairshare_max_age_hours", "0", "Must be between 0.1 and 720 h."),
        ("gang_spread_after_hours", "-1", "Must be between 0 and 720 h."),
        ("preemption_grace_s", "-1", "Must be between 0 and 3,600 s."),
        ("reclaim_after_hours", "-1", "Must be between 0 and 720 h."),
        ("reclaim_after_hours", "soon", "Enter a number"),
        ("reclaim_guaranteed_share_percent", "-5", "Must be between 0 and 100 %."),
        ("reclaim_guaranteed_share_percent", "150", "Must be between 0 and 100 %."),
        ("within_team_order", "random", "Select a valid choice"),
        ("queue_order", "by-team-name", "Select a valid choice"),
        ("guarantee_overcommit_percent", "0", "Must be between 1 and 1,000 %."),
        ("heartbeat_interval_s", "0", "Must be between 1 and 600 s."),
        ("dead_after_missed_heartbeats", "0", "Must be between 1 and 20."),
        ("slow_threshold_percent", "-20", "Must be between 0 and 900 %."),
        ("slow_consecutive_steps", "0", "Must be between 1 and 100."),
    ],
)
def test_each_bad_policy_value_is_refused_next_to_its_field(world: World, field: str, value: str, message: str) -> None:
    FleetPolicyFactory()
    response = client_for(world.admin).post("/admin-portal/policy/", {**POLICY, field: value})
    assert response.status_code == 400
    body = response.content.decode()
    assert f'id="id_{field}-errors"' in body and message in body
    assert FleetPolicy.objects.get().reservation_depth == 1
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(("posted", "engine_value"), [("0.5", 1800.0), ("", None)], ids=["bound", "only-when-it-pays"])
def test_the_reclaim_bound_set_on_the_policy_page_reaches_the_engine(
    world: World, posted: str, engine_value: float | None
) -> None:
    FleetPolicyFactory()
    client = client_for(world.admin)
    page = client.get("/admin-portal/policy/").content.decode()
    assert 'name="reclaim_after_hours"' in page and "worth less than the wait it saves" in page

    assert client.post("/admin-portal/policy/", {**POLICY, "reclaim_after_hours": posted}).status_code == 302

    assert policy_from_row(FleetPolicy.objects.get()).reclaim_after_s == engine_value
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.FLEET_POLICY_UPDATED)
    assert event.before["reclaim_after_s"] == 3600.0 and event.after["reclaim_after_s"] == engine_value


def test_the_patience_of_gangs_below_their_guarantee_set_on_the_policy_page_reaches_the_engine(
    world: World,
) -> None:
    FleetPolicyFactory()
    client = client_for(world.admin)
    page = client.get("/admin-portal/policy/").content.decode()
    assert 'name="guarantee_spread_after_hours"' in page and "uses less than its guarantee" in page

    assert client.post("/admin-portal/policy/", {**POLICY, "guarantee_spread_after_hours": "2"}).status_code == 302
    assert policy_from_row(FleetPolicy.objects.get()).guarantee_spread_after_s == 7200.0
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.FLEET_POLICY_UPDATED)
    assert (event.before["guarantee_spread_after_s"], event.after["guarantee_spread_after_s"]) == (0.0, 7200.0)

    assert client.post("/admin-portal/policy/", {**POLICY, "guarantee_spread_after_hours": ""}).status_code == 302
    assert policy_from_row(FleetPolicy.objects.get()).guarantee_spread_after_s is None


def test_a_fresh_fleet_policy_reclaims_as_the_engine_does_by_default() -> None:
    assert policy_from_row(FleetPolicy()).reclaim_after_s == engine.Policy().reclaim_after_s
    assert policy_from_row(FleetPolicy()).reclaim_guaranteed_share == engine.Policy().reclaim_guaranteed_share
    assert policy_from_row(FleetPolicy()).partial_reclaim_young_s == engine.Policy().partial_reclaim_young_s


def test_a_stored_policy_at_the_old_reclaim_share_default_takes_the_new_one_and_a_chosen_share_stays() -> None:
    migration = importlib.import_module("tenants.migrations.0017_reclaim_partial_only_of_checkpointing_loans")
    FleetPolicyFactory(reclaim_guaranteed_share=1.0)
    migration.old_default_takes_the_new_one(django_apps, None)
    assert FleetPolicy.objects.get().reclaim_guaranteed_share == 0.5

    FleetPolicy.objects.update(reclaim_guaranteed_share=0.25)
    migration.old_default_takes_the_new_one(django_apps, None)
    assert FleetPolicy.objects.get().reclaim_guaranteed_share == 0.25


def test_a_stored_policy_at_the_old_reclaim_bounds_takes_the_new_ones_and_chosen_bounds_stay() -> None:
    migration = importlib.import_module("tenants.migrations.0019_reclaim_bounds_under_rent_or_buy")
    FleetPolicyFactory(reclaim_after_s=4 * 3600.0, reclaim_guaranteed_share=0.5, partial_reclaim_young_s=3600.0)
    migration.old_defaults_take_the_new_ones(django_apps, None)
    stored = FleetPolicy.objects.get()
    defaults = engine.Policy()
    assert (stored.reclaim_after_s, stored.reclaim_guaranteed_share, stored.partial_reclaim_young_s) == (
        defaults.reclaim_after_s,
        defaults.reclaim_guaranteed_share,
        defaults.partial_reclaim_young_s,
    )

    FleetPolicy.objects.update(reclaim_after_s=None, reclaim_guaranteed_share=1.0, partial_reclaim_young_s=600.0)
    migration.old_defaults_take_the_new_ones(django_apps, None)
    chosen = FleetPolicy.objects.get()
    assert (chosen.reclaim_after_s, chosen.reclaim_guaranteed_share, chosen.partial_reclaim_young_s) == (
        None,
        1.0,
        600.0,
    )


def test_a_stored_policy_at_the_old_reclaim_credit_default_takes_the_new_one_and_a_chosen_credit_stays() -> None:
    migration = importlib.import_module("tenants.migrations.0021_reclaim_wait_credit_unbounded")
    FleetPolicyFactory(reclaim_wait_credit=1.0)
    migration.old_default_takes_the_new_one(django_apps, None)
    assert FleetPolicy.objects.get().reclaim_wait_credit == engine.Policy().reclaim_wait_credit is None

    FleetPolicy.objects.update(reclaim_wait_credit=4.0)
    migration.old_default_takes_the_new_one(django_apps, None)
    assert FleetPolicy.objects.get().reclaim_wait_credit == 4.0


def test_the_reclaim_share_set_on_the_policy_page_reaches_the_engine(world: World) -> None:
    FleetPolicyFactory()
    client = client_for(world.admin)
    page = client.get("/admin-portal/policy/").content.decode()
    assert 'name="reclaim_guaranteed_share_percent"' in page and "lies within that guarantee" in page

    posted = {**POLICY, "reclaim_guaranteed_share_percent": "50"}
    assert client.post("/admin-portal/policy/", posted).status_code == 302

    assert policy_from_row(FleetPolicy.objects.get()).reclaim_guaranteed_share == 0.5
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.FLEET_POLICY_UPDATED)
    assert event.after["reclaim_guaranteed_share"] == 0.5


def test_the_young_loans_a_partial_reclaim_may_take_set_on_the_policy_page_reach_the_engine(world: World) -> None:
    FleetPolicyFactory()
    client = client_for(world.admin)
    page = client.get("/admin-portal/policy/").content.decode()
    assert 'name="partial_reclaim_young_hours"' in page and "does not checkpoint" in page

    assert client.post("/admin-portal/policy/", {**POLICY, "partial_reclaim_young_hours": "3"}).status_code == 302
    assert policy_from_row(FleetPolicy.objects.get()).partial_reclaim_young_s == 10800.0
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.FLEET_POLICY_UPDATED)
    assert (event.before["partial_reclaim_young_s"], event.after["partial_reclaim_young_s"]) == (7200.0, 10800.0)

    assert client.post("/admin-portal/policy/", {**POLICY, "partial_reclaim_young_hours": ""}).status_code == 302
    assert policy_from_row(FleetPolicy.objects.get()).partial_reclaim_young_s is None


def test_the_policy_page_lists_the_priority_classes(world: World) -> None:
    PriorityClassFactory(name="serving-critical", value=1000, kind="serving", preemptible=False)
    body = client_for(world.admin).get("/admin-portal/policy/").content.decode()
    assert "serving-critical" in body and "1000" in body


def test_an_admin_adds_a_priority_class_and_it_is_audited(world: World) -> None:
    response = client_for(world.admin).post("/admin-portal/policy/classes/new/", CLASS)
    assert response.status_code == 302
    pc = PriorityClass.objects.get()
    assert (pc.name, pc.value, pc.kind, pc.preemptible, pc.may_preempt) == ("research", 400, "training", True, False)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.PRIORITY_CLASS_SAVED)
    assert event.before is None and event.after["name"] == "research"


def test_an_admin_edits_a_priority_class_with_before_and_after(world: World) -> None:
    pc = PriorityClassFactory(name="batch", value=100, kind="batch")
    client = client_for(world.admin)
    assert b'value="batch"' in client.get(f"/admin-portal/policy/classes/{pc.pk}/").content
    response = client.post(f"/admin-portal/policy/classes/{pc.pk}/", {"name": "batch", "value": "150", "kind": "batch"})
    assert response.status_code == 302
    pc.refresh_from_db()
    assert pc.value == 150 and pc.preemptible is False
    event = AuditEvent.objects.get()
    assert event.before["value"] == 100 and event.after["value"] == 150


def test_an_unknown_priority_class_is_a_404(world: World) -> None:
    assert client_for(world.admin).get("/admin-portal/policy/classes/999999/").status_code == 404


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("name", "", "This field is required"),
        ("name", "has spaces", "Enter a valid"),
        ("name", "taken", "Priority class with this Name already exists"),
        ("value", "", "This field is required"),
        ("value", "high", "Enter a whole number"),
        ("kind", "gaming", "Select a valid choice"),
    ],
)
def test_each_bad_priority_class_value_is_refused_next_to_its_field(
    world: World, field: str, value: str, message: str
) -> None:
    PriorityClassFactory(name="taken")
    response = client_for(world.admin).post("/admin-portal/policy/classes/new/", {**CLASS, field: value})
    assert response.status_code == 400
    body = response.content.decode()
    assert f'id="id_{field}-errors"' in body and message in body
    assert PriorityClass.objects.count() == 1
    assert not AuditEvent.objects.exists()


def test_the_policy_form_speaks_days_hours_and_percentages_with_help_on_every_field(world: World) -> None:
    FleetPolicyFactory()
    response = client_for(world.admin).get("/admin-portal/policy/")
    form, page = response.context["form"], response.content.decode()

    assert "Fair-share half-life (days)" in page and "Fairshare half life s" not in page
    assert form["fairshare_half_life_days"].value() == 7
    assert form["topology_penalty_pod_percent"].value() == 15
    assert form["reclaim_after_hours"].value() == 1
    assert form["guarantee_overcommit_percent"].value() == 100
    assert "604800" not in page and "1.15" not in page
    assert all(field.help_text for field in form), [field.name for field in form if not field.help_text]


def test_the_policy_page_names_the_engine_settings_admins_cannot_set_with_their_values(world: World) -> None:
    page = client_for(world.admin).get("/admin-portal/policy/").content.decode()
    section = page[page.index('id="engine-only"') :]

    for name in ("topology_aware", "elastic", "fairshare", "preemption_scan_budget", "max_preemption_attempts"):
        assert f"<code>{name}</code>" in section
    assert f'<td class="num">{engine.Policy().preemption_scan_budget:,}</td>' in section
