"""Every number of the fleet policy has bounds a fleet can use, declared once (`tenants.policy_units`)
and enforced at every entry: the policy form (in its own units, the range in its help), the API, the
service (the model's validators) and, for values already stored, a migration and the cycle's read."""

from __future__ import annotations

import importlib
import logging
import math

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import ValidationError
from django.db import models
from rest_framework.test import APIClient

from scheduling import engine
from scheduling.convert import PENALTY_FIELDS, POLICY_FIELDS, policy_from_row
from tenants import policy_units
from tenants.models import AuditEvent, FleetPolicy
from tenants.selectors import fleet_policy_for_cycle
from tenants.services import fleet_policy_update
from tests.factories import FleetPolicyFactory
from tests.tenants.conftest import World, client_for
from tests.tenants.test_policy_pages import POLICY

pytestmark = pytest.mark.django_db

NUMBERS = [field for field in policy_units.POLICY_FIELDS if field.unit is not None]
MIGRATION = "tenants.migrations.0027_policy_bounds"


@pytest.fixture
def admin_api(world: World) -> APIClient:
    client = APIClient()
    client.force_authenticate(world.admin)
    return client


def _model_field(name: str) -> models.Field:  # type: ignore[type-arg]
    field = FleetPolicy._meta.get_field(name)
    assert isinstance(field, models.Field)
    return field


# The declaration ----------------------------------------------------------------------------------


@pytest.mark.parametrize("described", NUMBERS, ids=lambda field: field.name)
def test_every_policy_number_has_finite_bounds_around_its_default(described: policy_units.PolicyField) -> None:
    default = _model_field(described.name).get_default()

    assert described.minimum is not None and described.maximum is not None
    assert math.isfinite(described.minimum) and math.isfinite(described.maximum)
    assert described.minimum < described.maximum
    assert default is None or described.minimum <= default <= described.maximum


def test_every_number_of_the_engines_default_policy_lies_within_its_bounds() -> None:
    defaults = engine.Policy()
    for name, engine_name in POLICY_FIELDS.items():
        value = getattr(defaults, engine_name)
        described = policy_units.BY_NAME[name]
        if described.unit is not None and value is not None:
            assert described.problem(value) is None, name
    for name, level in PENALTY_FIELDS.items():
        assert policy_units.BY_NAME[name].problem(defaults.penalty(level)) is None, name


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (1e16, "is above 600"),
        (1e308, "is above 600"),
        (9223372036854775807, "is above 600"),
        (10**400, "is not finite"),
        (-1.0, "is below 1"),
        (math.nan, "is not finite"),
        (math.inf, "is not finite"),
        ("10", "is not a number"),
        (True, "is not a number"),
        (600, None),
        (1.0, None),
    ],
)
def test_a_stored_value_is_usable_only_as_a_finite_number_within_the_bounds(value: object, problem: str) -> None:
    assert policy_units.BY_NAME["heartbeat_interval_s"].problem(value) == problem


# The policy form ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("heartbeat_interval_s", "1e16", "Must be between 1 and 600 s."),
        ("heartbeat_interval_s", "1e308", "Must be between 1 and 600 s."),
        ("heartbeat_interval_s", "1e400", "Enter a number."),
        ("heartbeat_interval_s", "nan", "Enter a number."),
        ("dead_after_missed_heartbeats", "9223372036854775807", "Must be between 1 and 20."),
        ("slow_consecutive_steps", "101", "Must be between 1 and 100."),
        ("reservation_depth", "17", "Must be between 1 and 16."),
        ("fairshare_half_life_days", "366", "Must be between 0.1 and 365 days."),
        ("fairshare_max_age_hours", "721", "Must be between 0.1 and 720 h."),
        ("gang_spread_after_hours", "1e308", "Must be between 0 and 720 h."),
        ("guarantee_spread_after_hours", "721", "Must be between 0 and 720 h."),
        ("reclaim_after_hours", "721", "Must be between 0 and 720 h."),
        ("partial_reclaim_young_hours", "721", "Must be between 0 and 720 h."),
        ("quota_hold_after_hours", "-1", "Must be between 0 and 720 h."),
        ("preemption_grace_s", "3601", "Must be between 0 and 3,600 s."),
        ("reclaim_wait_credit", "1001", "Must be between 0 and 1,000."),
        ("fairshare_age_weight", "101", "Must be between 0 and 100."),
        ("topology_penalty_fleet_percent", "901", "Must be between 0 and 900 %."),
        ("slow_threshold_percent", "1e16", "Must be between 0 and 900 %."),
        ("guarantee_overcommit_percent", "1001", "Must be between 1 and 1,000 %."),
        ("guarantee_overcommit_percent", "0.5", "Must be between 1 and 1,000 %."),
    ],
)
def test_the_policy_form_refuses_a_number_outside_its_bounds_with_the_range(
    world: World, field: str, value: str, message: str
) -> None:
    FleetPolicyFactory()

    response = client_for(world.admin).post("/admin-portal/policy/", {**POLICY, field: value})

    assert response.status_code == 400
    assert response.context["form"].errors[field] == [message]
    assert FleetPolicy.objects.get().heartbeat_interval_s == 10.0
    assert not AuditEvent.objects.exists()


def test_the_policy_form_says_each_numbers_range_in_its_help_and_units(world: World) -> None:
    FleetPolicyFactory()
    form = client_for(world.admin).get("/admin-portal/policy/").context["form"]

    for described in NUMBERS:
        field = form.fields[described.form_name]
        assert field.help_text.endswith(f" Must be {described.shown_range}."), described.name
        assert (field.min_value, field.max_value) == described.shown_bounds, described.name
    assert form.fields["heartbeat_interval_s"].help_text.endswith("Must be between 1 and 600 s.")
    assert form.fields["fairshare_half_life_days"].help_text.endswith("Must be between 0.1 and 365 days.")
    assert form.fields["reclaim_guaranteed_share_percent"].help_text.endswith("Must be between 0 and 100 %.")


@pytest.mark.parametrize("end", ["minimum", "maximum"])
def test_the_policy_form_accepts_every_number_at_each_end_of_its_range(world: World, end: str) -> None:
    FleetPolicyFactory()
    posted = dict(POLICY)
    for described in NUMBERS:
        low, high = described.shown_bounds
        posted[described.form_name] = f"{low if end == 'minimum' else high:g}"

    response = client_for(world.admin).post("/admin-portal/policy/", posted)

    assert response.status_code == 302, response.context["form"].errors
    stored = FleetPolicy.objects.get()
    for described in NUMBERS:
        expected = described.minimum if end == "minimum" else described.maximum
        assert getattr(stored, described.name) == pytest.approx(expected), described.name


# The API and the service --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "detail"),
    [
        ("heartbeat_interval_s", 1e16, "Must be between 1 and 600 s."),
        ("heartbeat_interval_s", 1e308, "Must be between 1 and 600 s."),
        ("heartbeat_interval_s", -1.0, "Must be between 1 and 600 s."),
        ("dead_after_missed_heartbeats", 9223372036854775807, "Must be between 1 and 20."),
        ("slow_consecutive_steps", 9223372036854775807, "Must be between 1 and 100."),
        ("reservation_depth", 99, "Must be between 1 and 16."),
        ("fairshare_half_life_s", 1e308, "Must be between 8,640 and 31,536,000 s (0.1 to 365 days)."),
        ("gang_spread_after_s", 1e16, "Must be between 0 and 2,592,000 s (0 to 720 h)."),
        ("reclaim_guaranteed_share", 1.5, "Must be between 0 and 1 (0 to 100 %)."),
        ("topology_penalty_pod", 1e308, "Must be between 1 and 10 (0 to 900 %)."),
        ("slow_threshold", 0.5, "Must be between 1 and 10 (0 to 900 %)."),
        ("guarantee_overcommit_ratio", 1e16, "Must be between 0.01 and 10 (1 to 1,000 %)."),
        ("preemption_grace_s", 1e308, "Must be between 0 and 3,600 s."),
    ],
)
def test_the_api_refuses_a_policy_number_outside_its_bounds_with_the_range(
    admin_api: APIClient, field: str, value: float, detail: str
) -> None:
    FleetPolicyFactory()
    response = admin_api.patch("/api/v1/policy/", {field: value}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "validation_error"
    assert body["errors"] == [{"code": body["errors"][0]["code"], "detail": detail, "attr": field}]
    assert FleetPolicy.objects.get().heartbeat_interval_s == 10.0
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.FLEET_POLICY_UPDATED).exists()


@pytest.mark.parametrize("described", NUMBERS, ids=lambda field: field.name)
def test_the_api_refuses_the_largest_number_of_its_column_for_every_policy_number(
    admin_api: APIClient, described: policy_units.PolicyField
) -> None:
    whole = isinstance(_model_field(described.name), models.IntegerField)
    largest = 9223372036854775807 if whole else 1e308

    response = admin_api.patch("/api/v1/policy/", {described.name: largest}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"][0] == {
        "code": "max_value",
        "detail": f"Must be {described.stored_range}.",
        "attr": described.name,
    }


def test_the_api_refuses_nan_and_infinity_whatever_the_encoding(admin_api: APIClient) -> None:
    FleetPolicyFactory()
    admin = admin_api

    json_nan = admin.patch("/api/v1/policy/", '{"heartbeat_interval_s": NaN}', content_type="application/json")
    json_huge = admin.patch("/api/v1/policy/", '{"heartbeat_interval_s": 1e400}', content_type="application/json")
    form_nan = admin.patch(
        "/api/v1/policy/", "heartbeat_interval_s=nan", content_type="application/x-www-form-urlencoded"
    )

    assert [json_nan.status_code, json_huge.status_code, form_nan.status_code] == [400, 400, 400]
    assert FleetPolicy.objects.get().heartbeat_interval_s == 10.0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"heartbeat_interval_s": 1e16}, "Must be between 1 and 600 s."),
        ({"heartbeat_interval_s": math.nan}, "Must be a finite number."),
        ({"heartbeat_interval_s": math.inf}, "Must be a finite number."),
        ({"dead_after_missed_heartbeats": 9223372036854775807}, "Must be between 1 and 20."),
        ({"dead_after_missed_heartbeats": 10**400}, "Must be a finite number."),
    ],
)
def test_the_service_refuses_a_policy_number_outside_its_bounds(changes: dict[str, float], message: str) -> None:
    FleetPolicyFactory()

    with pytest.raises(ValidationError) as caught:
        fleet_policy_update(actor=None, changes=changes)

    (name,) = changes
    assert message in caught.value.message_dict[name]
    assert FleetPolicy.objects.get().heartbeat_interval_s == 10.0


# Values already stored ----------------------------------------------------------------------------


def test_the_migration_brings_stored_numbers_within_their_bounds_and_audits_it() -> None:
    migration = importlib.import_module(MIGRATION)
    FleetPolicyFactory()
    FleetPolicy.objects.update(
        heartbeat_interval_s=1e16,
        fairshare_half_life_s=1e308,
        dead_after_missed_heartbeats=2147483647,  # the largest a PostgreSQL integer column holds
        preemption_grace_s=-1.0,
        topology_penalty_fleet=math.inf,
        reclaim_after_s=None,
        slow_consecutive_steps=7,
    )

    migration.out_of_bounds_values_are_brought_within(django_apps, None)

    stored = FleetPolicy.objects.get()
    assert stored.heartbeat_interval_s == 600.0  # clamped: as far as the admin meant, within the fleet's reach
    assert stored.fairshare_half_life_s == 365 * 86400.0
    assert stored.dead_after_missed_heartbeats == 20
    assert stored.preemption_grace_s == 0.0
    assert stored.topology_penalty_fleet == 1.4  # not a finite number: the default
    assert (stored.reclaim_after_s, stored.slow_consecutive_steps) == (None, 7)  # usable values stay
    stored.full_clean()
    event = AuditEvent.objects.get()
    assert event.kind == AuditEvent.Kind.FLEET_POLICY_UPDATED and event.actor is None
    # PostgreSQL's jsonb reads 1e308 back as the integer it equals: compare numbers as numbers.
    before = {name: float(v) if isinstance(v, int | float) else v for name, v in event.before.items()}
    assert before == {
        "fairshare_half_life_s": 1e308,
        "preemption_grace_s": -1.0,
        "topology_penalty_fleet": "inf",
        "heartbeat_interval_s": 1e16,
        "dead_after_missed_heartbeats": 2147483647,
    }
    assert event.after["heartbeat_interval_s"] == 600.0


def test_the_migration_leaves_a_policy_within_its_bounds_alone() -> None:
    migration = importlib.import_module(MIGRATION)
    FleetPolicyFactory(heartbeat_interval_s=600.0, reservation_depth=16, guarantee_overcommit_ratio=0.01)

    migration.out_of_bounds_values_are_brought_within(django_apps, None)

    stored = FleetPolicy.objects.get()
    assert (stored.heartbeat_interval_s, stored.reservation_depth, stored.guarantee_overcommit_ratio) == (
        600.0,
        16,
        0.01,
    )
    assert not AuditEvent.objects.exists()


def test_the_migrations_bounds_are_this_releases() -> None:
    """A bound changed since the migration needs a migration of its own to bring stored values within
    it; a setting declared since starts at its default, which its bounds admit."""
    migration = importlib.import_module(MIGRATION)
    declared = {
        described.name: (described.minimum, described.maximum, _model_field(described.name).get_default())
        for described in NUMBERS
    }
    assert {name: declared[name] for name in migration.BOUNDS} == migration.BOUNDS
    for name in declared.keys() - migration.BOUNDS.keys():
        minimum, maximum, default = declared[name]
        assert default is None or minimum <= default <= maximum, name


def test_the_cycle_uses_the_default_of_each_unusable_stored_setting_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    FleetPolicyFactory(reservation_depth=3)
    FleetPolicy.objects.update(
        heartbeat_interval_s=1e308, queue_order="by-team-name", fairshare_half_life_s=-5.0, reclaim_after_s=None
    )

    with caplog.at_level(logging.ERROR, logger="tenants.selectors"):
        policy = fleet_policy_for_cycle()

    assert policy is not None
    assert (policy.heartbeat_interval_s, policy.queue_order) == (10.0, "fair_share")
    assert policy.fairshare_half_life_s == 7 * 86400.0
    assert (policy.reservation_depth, policy.reclaim_after_s) == (3, None)  # usable values stay
    assert policy_from_row(policy).reservation_depth == 3
    logged = sorted(record.getMessage() for record in caplog.records if record.levelno == logging.ERROR)
    assert len(logged) == 3
    assert logged[0].startswith("fleet policy: fairshare_half_life_s = -5.0 is below 8,640; this cycle uses")
    assert logged[1].startswith("fleet policy: heartbeat_interval_s = 1e+308 is above 600;")
    assert logged[2].startswith("fleet policy: queue_order = 'by-team-name' is not one of the choices;")
    assert FleetPolicy.objects.get().heartbeat_interval_s == 1e308  # the row is the admin's to correct


def test_the_cycle_reads_no_policy_before_anyone_saved_one() -> None:
    assert fleet_policy_for_cycle() is None
