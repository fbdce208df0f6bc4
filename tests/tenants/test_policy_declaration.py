"""Each policy setting is declared once (on the engine's `Policy`, or among the fleet settings
beside it) and every surface lists exactly the declared settings: the stored policy, the policy
form, the API, the audit, the conversion to the engine, the policy page's engine-only list, the
what-if settings and the simulator's tweaks."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest
from django.core.management import call_command
from django.db import models

from api.views.tenants import PolicySerializer
from scheduling import engine
from scheduling.convert import ENGINE_ONLY_FIELDS, PENALTY_FIELDS, POLICY_FIELDS, PORTAL_ONLY_FIELDS, policy_from_row
from scheduling.engine import policy_settings
from scheduling.engine.knobs import HOURS, Knob, knob, knobs_of
from simulations.forms import SimulationForm
from simulations.inputs import POLICY_SETTINGS, candidate_preset, policy_settings_clean
from tenants.forms import FleetPolicyForm
from tenants.models import FleetPolicy
from tenants.selectors import engine_only_knobs
from tenants.services import policy as policy_service

STORED = [each.name for each in policy_settings.STORED]
NUMBERS = [each for each in policy_settings.KNOBS if each.unit is not None]


def _sim_quotas() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "sim_quotas.py"
    spec = importlib.util.spec_from_file_location("sim_quotas_declared", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The declaration ----------------------------------------------------------------------------------


def test_every_field_of_the_engines_policy_is_declared_as_a_setting() -> None:
    declared = {knob.engine for knob in policy_settings.ENGINE_KNOBS}
    assert declared == {field.name for field in dataclasses.fields(engine.Policy)}
    assert all(knob.engine is None for knob in policy_settings.FLEET_SETTINGS)


def test_every_setting_has_a_label_help_and_a_default_it_accepts() -> None:
    for each in policy_settings.KNOBS:
        assert each.label and each.help.endswith("."), each.name
        assert each.problem(each.default) is None, each.name
        if each.kind is str:
            assert each.choices and each.unit is None, each.name
        if each.kind is bool:
            assert not each.choices and each.unit is None, each.name


@pytest.mark.parametrize("described", NUMBERS, ids=lambda knob: knob.name)
def test_every_number_has_a_unit_and_finite_bounds(described: Knob) -> None:
    assert described.minimum is not None and described.maximum is not None
    assert math.isfinite(described.minimum) and described.minimum < described.maximum
    assert math.isfinite(described.maximum)


def test_a_field_of_a_policy_without_a_declaration_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Undeclared:
        declared: float = knob(1.0, "Declared", "Declared.", HOURS, bounds=(0.0, 2.0))
        undeclared: float = 1.0

    with pytest.raises(TypeError, match="Undeclared.undeclared is not declared"):
        knobs_of(Undeclared)


def test_a_declaration_reads_its_type_from_an_annotation_or_a_type() -> None:
    declared = dataclasses.make_dataclass(
        "Made", [("wait_s", float, knob(60.0, "Wait", "A wait.", HOURS, bounds=(0.0, 3600.0)))]
    )
    (made,) = knobs_of(declared)
    assert (made.name, made.kind, made.default, made.nullable) == ("wait_s", float, 60.0, False)


def test_a_number_without_bounds_or_a_switch_with_a_unit_cannot_be_declared() -> None:
    with pytest.raises(ValueError, match="both a unit and bounds"):
        knob(1.0, "Unbounded", "No bounds.", HOURS)
    with pytest.raises(ValueError, match="scope"):
        knob(True, "Switch", "A switch.", scope="everyone")


# The stored policy, the form, the API, the audit --------------------------------------------------


def test_the_stored_policy_has_one_column_per_stored_setting_as_declared() -> None:
    columns = [field for field in FleetPolicy._meta.concrete_fields if field.name not in ("id", "updated_at")]
    assert [field.name for field in columns] == STORED
    for column in columns:
        declared = policy_settings.BY_NAME[column.name]
        assert column.get_default() == declared.default, column.name
        assert column.null is declared.nullable, column.name
        assert [value for value, _ in column.choices or ()] == [value for value, _ in declared.choices], column.name
        assert (column.verbose_name, column.help_text) == (declared.label, declared.help), column.name
        if declared.kind is int:
            assert isinstance(column, models.PositiveIntegerField), column.name


@pytest.mark.django_db
def test_the_migrations_hold_every_declared_column() -> None:
    # Adding a setting is its declaration and the migration makemigrations writes for it.
    call_command("makemigrations", "tenants", "--check", "--dry-run", verbosity=0)


def test_the_policy_form_has_a_field_for_every_stored_setting_in_the_declared_order() -> None:
    form = FleetPolicyForm(instance=FleetPolicy())
    assert list(form.model_names.values()) == STORED
    assert list(form.fields) == list(form.model_names)


def test_the_api_serializes_every_stored_setting() -> None:
    assert list(PolicySerializer().fields) == [*STORED, "updated_at"]


def test_an_update_audits_every_stored_setting() -> None:
    assert policy_service.POLICY_FIELDS == STORED


# The engine ---------------------------------------------------------------------------------------


def test_convert_maps_every_stored_setting_to_the_engine_or_names_it_the_fleets() -> None:
    to_engine = set(POLICY_FIELDS) | set(PENALTY_FIELDS)
    fleet_only = set(PORTAL_ONLY_FIELDS) - {"id", "updated_at"}
    assert not to_engine & fleet_only
    assert to_engine | fleet_only == set(STORED)
    assert fleet_only == {knob.name for knob in policy_settings.FLEET_SETTINGS}
    assert set(ENGINE_ONLY_FIELDS) == {knob.key for knob in policy_settings.ENGINE_ONLY}
    assert set(POLICY_FIELDS.values()) | {"level_penalty"} | set(ENGINE_ONLY_FIELDS) == {
        field.name for field in dataclasses.fields(engine.Policy)
    }


def test_the_policy_page_lists_every_engine_setting_admins_do_not_set() -> None:
    shown = {row.name: row.value for row in engine_only_knobs()}
    assert shown == {
        "topology_aware": "on",
        "elastic": "on",
        "gpus_per_node": "8",
        "max_preemption_attempts": "16",
        "preemption_scan_budget": "8,192",
        "fairshare": "on",
        "failure_spread_after_s": "0.0",
    }


def test_a_stored_policy_at_its_defaults_is_the_engines_default_policy() -> None:
    assert policy_from_row(FleetPolicy()) == engine.Policy()


def test_a_stored_topology_penalty_changes_only_its_level() -> None:
    policy = policy_from_row(FleetPolicy(topology_penalty_pod=1.3))
    assert policy.level_penalty == (("node", 1.0), ("rack", 1.0), ("pod", 1.3), ("fleet", 1.4))


# What-if replays and the simulator's tweaks -------------------------------------------------------


def test_a_what_if_replay_may_change_every_engine_setting_but_the_engines_own_bounds() -> None:
    internal = {"gpus_per_node", "max_preemption_attempts", "preemption_scan_budget"}
    engine_keys = {knob.key for knob in policy_settings.ENGINE_KNOBS}
    assert set(POLICY_SETTINGS) == engine_keys - internal
    form = SimulationForm(teams=[], fleet_wide=True)
    assert sorted(form.setting_names.values()) == sorted(POLICY_SETTINGS)
    assert set(form.setting_names) <= set(form.fields)


def test_the_what_if_form_takes_each_setting_in_the_policy_pages_units() -> None:
    form = SimulationForm(
        {
            "source": "history",
            "trace_format": "canonical",
            "preset": "fleetline",
            "seed": "0",
            "max_age_hours": "2",
            "reclaim_guaranteed_share_percent": "50",
            "topology_penalty_pod_percent": "30",
            "preemption_grace_s": "45",
            "reservation_depth": "3",
            "fairshare": "off",
            "queue_order": "shortest_limit",
        },
        teams=[],
        fleet_wide=True,
    )

    assert form.is_valid(), form.errors
    chosen = form.policy_settings()
    assert chosen == {
        "max_age_s": 7200.0,
        "reclaim_guaranteed_share": 0.5,
        "topology_penalty_pod": 1.3,
        "preemption_grace_s": 45.0,
        "reservation_depth": 3,
        "fairshare": False,
        "queue_order": "shortest_limit",
    }
    policy = candidate_preset(preset="fleetline", policy_settings=policy_settings_clean(raw=chosen)).policy()
    assert (policy.max_age_s, policy.reclaim_guaranteed_share, policy.reservation_depth) == (7200.0, 0.5, 3)
    assert policy.level_penalty == (("node", 1.0), ("rack", 1.0), ("pod", 1.3), ("fleet", 1.4))
    assert (policy.fairshare, policy.queue_order) == (False, "shortest_limit")


def test_the_simulators_tweaks_are_every_engine_setting() -> None:
    assert set(policy_settings.TWEAKS) == {knob.key for knob in policy_settings.ENGINE_KNOBS}
    sim_quotas = _sim_quotas()
    for key, declared in policy_settings.TWEAKS.items():
        default = declared.default
        text = "none" if default is None else ("on" if default is True else "off" if default is False else str(default))
        assert sim_quotas.tweaked(f"{key}={text}").policy() == engine.Policy(), key


@pytest.mark.parametrize(
    ("tweak", "message"),
    [
        ("warp_drive=on", "'warp_drive' is not a setting of the engine's Policy"),
        ("backfill=yes", "backfill is on or off"),
        ("reservation_depth=99", "reservation_depth = 99 is above 16"),
        ("reclaim_guaranteed_share=none", "reclaim_guaranteed_share is a number, not 'none'"),
        ("max_age_s=nan", "max_age_s = nan is not finite"),
        ("queue_order=random", "queue_order = random is not one of the choices"),
    ],
)
def test_a_tweak_outside_the_declaration_is_refused_saying_why(tweak: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        _sim_quotas().tweaked(tweak)


def test_a_tweak_of_a_topology_penalty_changes_its_level() -> None:
    policy = _sim_quotas().tweaked("topology_penalty_fleet=2,gang_spread_after_s=none").policy()
    assert policy.level_penalty == (("node", 1.0), ("rack", 1.0), ("pod", 1.15), ("fleet", 2.0))
    assert policy.gang_spread_after_s is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_age_hours", "721", "Must be between 0.1 and 720 h."),
        ("reservation_depth", "0", "Must be between 1 and 16."),
        ("reclaim_guaranteed_share_percent", "101", "Must be between 0 and 100 %."),
        ("topology_penalty_fleet_percent", "-1", "Must be between 0 and 900 %."),
    ],
)
def test_the_what_if_form_refuses_a_setting_outside_its_bounds_beside_it_in_its_units(
    field: str, value: str, message: str
) -> None:
    form = SimulationForm(
        {"source": "history", "trace_format": "canonical", "preset": "fleetline", "seed": "0", field: value},
        teams=[],
        fleet_wide=True,
    )

    assert not form.is_valid()
    assert form.errors[field] == [message]
