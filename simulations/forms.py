"""The replay form: shapes only; ``simulation_start`` decides (bounds, trace errors, permissions)."""

from __future__ import annotations

from typing import Any

from django import forms

from core.forms import AsciiFloatField, AsciiIntegerField
from scheduling.engine.knobs import Knob, entry_name
from scheduling.sim.runner import PRESETS
from scheduling.sim.trace import FORMATS
from simulations.inputs import POLICY_SETTINGS
from simulations.models import Simulation
from tenants.forms import policy_number_field
from tenants.models import Team
from tenants.policy_units import PolicyField

KEEP = ""
TRI_STATE = [(KEEP, "as the policy has it"), ("on", "on"), ("off", "off")]
FLEET_WIDE = ""


class SimulationForm(forms.Form):
    team = forms.ChoiceField(required=False, help_text="A team's replay uses that team's jobs and quotas only.")
    source = forms.ChoiceField(choices=Simulation.Source.choices, widget=forms.RadioSelect, initial="history")
    trace = forms.FileField(required=False, label="Trace file", help_text="CSV, at most the size shown below.")
    trace_format = forms.ChoiceField(choices=[(f, f) for f in FORMATS], initial="canonical")
    history_days = AsciiFloatField(required=False, initial=7, label="Days of the fleet's jobs (fleet days)")
    preset = forms.ChoiceField(choices=[(name, name) for name in PRESETS], initial="fleetline", label="Policy")
    fleet_spec = forms.CharField(
        required=False,
        max_length=100,
        label="Fleet shape",
        help_text="PODSxRACKSxNODESxGPUS[:accelerator], groups joined by +; empty: the live fleet's shape.",
    )
    seed = AsciiIntegerField(initial=0, min_value=0, max_value=2**31 - 1)

    def __init__(self, *args: Any, teams: list[Team], fleet_wide: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Policy settings, each optional: empty keeps the chosen policy's own value.
        self.setting_names: dict[str, str] = {}  # form field -> setting (`POLICY_SETTINGS`)
        for key, knob in POLICY_SETTINGS.items():
            name = entry_name(key, knob.unit)
            self.fields[name] = setting_field(knob)
            self.setting_names[name] = key
        choices = [(FLEET_WIDE, "The whole fleet")] if fleet_wide else []
        self.fields["team"].choices = choices + [(team.slug, team.name) for team in teams]  # type: ignore[attr-defined]
        self.fields["team"].required = not fleet_wide
        self.teams = {team.slug: team for team in teams}

    def chosen_team(self) -> Team | None:
        return self.teams.get(self.cleaned_data.get("team") or "")

    def policy_settings(self) -> dict[str, Any]:
        """The settings the user changed, typed for ``policy_settings_clean``."""
        chosen: dict[str, Any] = {}
        for name, key in self.setting_names.items():
            value = self.cleaned_data.get(name)
            if value in (None, KEEP):
                continue
            knob = POLICY_SETTINGS[key]
            if isinstance(value, str):
                chosen[key] = {"on": True, "off": False}.get(value, value)
            else:
                stored = knob.unit.to_stored(value) if knob.unit is not None else value
                chosen[key] = int(stored) if knob.kind is int and stored is not None else stored
        return chosen


def setting_field(knob: Knob) -> forms.Field:
    """An optional form field for a setting, as the policy page has it: in its unit, refused
    outside its bounds with the range in words (the service checks again, in stored units:
    `simulations.inputs.policy_settings_clean`)."""
    if knob.kind is bool:
        return forms.ChoiceField(choices=TRI_STATE, required=False, label=knob.label, help_text=knob.help)
    if knob.kind is str:
        return forms.ChoiceField(
            choices=[(KEEP, "as the policy has it"), *knob.choices],
            required=False,
            label=knob.label,
            help_text=knob.help,
        )
    field = policy_number_field(PolicyField(knob), whole=knob.kind is int)
    field.required = False
    return field
