"""The portal speaks the engine's vocabulary: model choices and labels come from it, and every
fleet policy field maps to an engine policy field and back, or is named as deliberately absent."""

from __future__ import annotations

import dataclasses

import pytest
from django.db import models

from scheduling import engine
from scheduling.convert import ENGINE_ONLY_FIELDS, PENALTY_FIELDS, POLICY_FIELDS, PORTAL_ONLY_FIELDS, policy_from_row
from scheduling.engine.vocabulary import JOB_STATE_LABELS, KIND_LABELS, LEVEL_LABELS, WITHIN_TEAM_ORDER_LABELS
from scheduling.models import Job, JobKind, Level
from tenants.models import FleetPolicy, PriorityClass


@pytest.mark.parametrize(
    ("choices", "labels"),
    [
        (Level, LEVEL_LABELS),
        (JobKind, KIND_LABELS),
        (Job.State, JOB_STATE_LABELS),
        (FleetPolicy.WithinTeamOrder, WITHIN_TEAM_ORDER_LABELS),
    ],
    ids=["levels", "job-kinds", "job-states", "within-team-orders"],
)
def test_model_choices_are_the_engines_vocabulary(choices: type[models.TextChoices], labels: dict[str, str]) -> None:
    assert list(choices.choices) == list(labels.items())


def test_priority_class_kinds_are_the_job_kinds() -> None:
    assert dict(PriorityClass.Kind.choices) == KIND_LABELS


def test_every_fleet_policy_field_is_mapped_to_the_engine_or_named_as_portal_only() -> None:
    stored = {field.name for field in FleetPolicy._meta.concrete_fields}
    mapped = set(POLICY_FIELDS) | set(PENALTY_FIELDS)

    assert not mapped & set(PORTAL_ONLY_FIELDS)
    assert stored == mapped | set(PORTAL_ONLY_FIELDS)


def test_every_engine_policy_field_is_set_by_the_fleet_policy_or_named_as_engine_only() -> None:
    engine_fields = {field.name for field in dataclasses.fields(engine.Policy)}
    set_by_admins = set(POLICY_FIELDS.values()) | {"level_penalty"}

    assert not set_by_admins & set(ENGINE_ONLY_FIELDS)
    assert engine_fields == set_by_admins | set(ENGINE_ONLY_FIELDS)


def test_a_fleet_policy_left_at_its_defaults_is_the_engines_default_policy() -> None:
    assert policy_from_row(FleetPolicy()) == engine.Policy()


def test_every_admin_setting_reaches_the_engine() -> None:
    changed = {
        "backfill": False,
        "reservation_depth": 3,
        "preemption": False,
        "preemption_grace_s": 45.0,
        "reclaim_after_s": None,
        "reclaim_wait_credit": 4.0,
        "reclaim_guaranteed_share": 0.75,
        "partial_reclaim_young_s": 1800.0,
        "fairshare_half_life_s": 3 * 86400.0,
        "fairshare_age_weight": 0.5,
        "fairshare_max_age_s": 86400.0,
        "gang_spread_after_s": 3600.0,
        "guarantee_spread_after_s": 1800.0,
        "queue_order": "shortest_limit",
        "least_borrowed_first": False,
        "quota_hold_after_s": 7200.0,
        "max_share_of_lender": 0.5,
        "within_team_order": "las",
        "topology_penalty_node": 1.01,
        "topology_penalty_rack": 1.05,
        "topology_penalty_pod": 1.3,
        "topology_penalty_fleet": 2.0,
    }
    assert set(changed) == set(POLICY_FIELDS) | set(PENALTY_FIELDS)  # a new knob gets a value here
    policy = policy_from_row(FleetPolicy(**changed))
    defaults = engine.Policy()

    for name, engine_name in POLICY_FIELDS.items():
        assert getattr(policy, engine_name) == changed[name] != getattr(defaults, engine_name), name
    assert policy.level_penalty == (("node", 1.01), ("rack", 1.05), ("pod", 1.3), ("fleet", 2.0))
    for name in ENGINE_ONLY_FIELDS:
        assert getattr(policy, name) == getattr(defaults, name)
