"""The replay form: shapes only; ``simulation_start`` decides (bounds, trace errors, permissions)."""

from __future__ import annotations

from typing import Any

from django import forms

from portal.forms import AsciiFloatField, AsciiIntegerField
from scheduling.engine.vocabulary import QUEUE_ORDER_LABELS, WITHIN_TEAM_ORDER_LABELS
from scheduling.sim.runner import PRESETS
from scheduling.sim.trace import FORMATS
from simulations.inputs import POLICY_SETTINGS
from simulations.models import Simulation
from tenants.models import Team

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
    # Policy settings, each optional: empty keeps the chosen policy's own value.
    backfill = forms.ChoiceField(choices=TRI_STATE, required=False)
    reservation_depth = AsciiIntegerField(required=False)
    topology_aware = forms.ChoiceField(choices=TRI_STATE, required=False)
    preemption = forms.ChoiceField(choices=TRI_STATE, required=False)
    preemption_grace_s = AsciiFloatField(required=False, label="Preemption grace (s)")
    reclaim_after_s = AsciiFloatField(required=False, label="Evict for an owner after waiting (s)")
    reclaim_wait_credit = AsciiFloatField(
        required=False, label="Credit a reclaim at most this many times the wait so far"
    )
    reclaim_guaranteed_share = AsciiFloatField(
        required=False, label="Reclaim for a job with this share within its guarantee (0-1)"
    )
    partial_reclaim_young_s = AsciiFloatField(
        required=False, label="Such a reclaim takes loans without checkpoints started within (s)"
    )
    fairshare = forms.ChoiceField(choices=TRI_STATE, required=False, label="Fair share")
    fairshare_half_life_s = AsciiFloatField(required=False, label="Fair-share half-life (s)")
    age_weight = AsciiFloatField(required=False)
    max_age_s = AsciiFloatField(required=False, label="Max age (s)")
    queue_order = forms.ChoiceField(
        choices=[(KEEP, "as the policy has it"), *QUEUE_ORDER_LABELS.items()],
        required=False,
        label="Order across teams",
    )
    least_borrowed_first = forms.ChoiceField(
        choices=TRI_STATE, required=False, label="Borrowers of teams that borrow least first"
    )
    within_team_order = forms.ChoiceField(
        choices=[(KEEP, "as the policy has it"), *WITHIN_TEAM_ORDER_LABELS.items()],
        required=False,
    )
    elastic = forms.ChoiceField(choices=TRI_STATE, required=False)
    gang_spread_after_s = AsciiFloatField(required=False, label="Gangs spread after (s)")
    guarantee_spread_after_s = AsciiFloatField(
        required=False, label="Gangs of a team below its guarantee spread after (s)"
    )

    def __init__(self, *args: Any, teams: list[Team], fleet_wide: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(FLEET_WIDE, "The whole fleet")] if fleet_wide else []
        self.fields["team"].choices = choices + [(team.slug, team.name) for team in teams]  # type: ignore[attr-defined]
        self.fields["team"].required = not fleet_wide
        self.teams = {team.slug: team for team in teams}

    def chosen_team(self) -> Team | None:
        return self.teams.get(self.cleaned_data.get("team") or "")

    def policy_settings(self) -> dict[str, Any]:
        """The settings the user changed, typed for ``policy_settings_clean``."""
        chosen: dict[str, Any] = {}
        for name in POLICY_SETTINGS:
            value = self.cleaned_data.get(name)
            if value in (None, KEEP):
                continue
            chosen[name] = {"on": True, "off": False}.get(value, value) if isinstance(value, str) else value
        return chosen
