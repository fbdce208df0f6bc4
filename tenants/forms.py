"""Input validation for the tenants pages; the services decide, the forms only check shapes."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from scheduling.models import AcceleratorType
from tenants.models import AuditEvent, FleetPolicy, Membership, PriorityClass, Team

MAX_GPUS = 1_000_000


class QuotaRequestForm(forms.Form):
    accelerator_type = forms.ModelChoiceField(
        queryset=AcceleratorType.objects.order_by("name"),
        empty_label=None,
        error_messages={"invalid_choice": "Choose an accelerator type of this fleet."},
    )
    guaranteed = forms.IntegerField(min_value=0, max_value=MAX_GPUS, label="Guaranteed GPUs")
    borrow_limit = forms.IntegerField(
        min_value=0, max_value=MAX_GPUS, required=False, help_text="Leave empty for unlimited."
    )
    lend_limit = forms.IntegerField(
        min_value=0, max_value=MAX_GPUS, required=False, help_text="Leave empty for unlimited."
    )
    justification = forms.CharField(
        min_length=10,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the GPUs are for, and for how long.",
    )

    def __init__(self, *args: Any, accelerator_choices: list[tuple[int, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if accelerator_choices is not None:
            # The page has already read the accelerator types; rendering needs no second query.
            self.fields["accelerator_type"].choices = accelerator_choices


class ApproveForm(forms.Form):
    note = forms.CharField(required=False, max_length=2000)


class RejectForm(forms.Form):
    note = forms.CharField(max_length=2000, error_messages={"required": "Say why the request is rejected."})


class PriorityClassForm(forms.ModelForm):
    class Meta:
        model = PriorityClass
        fields = ["name", "value", "kind", "preemptible", "may_preempt"]


class FleetPolicyForm(forms.ModelForm):
    class Meta:
        model = FleetPolicy
        fields = [
            "fairshare_half_life_s",
            "fairshare_age_weight",
            "fairshare_max_age_s",
            "gang_spread_after_s",
            "backfill",
            "reservation_depth",
            "preemption",
            "preemption_grace_s",
            "reclaim_after_s",
            "within_team_order",
            "topology_penalty_node",
            "topology_penalty_rack",
            "topology_penalty_pod",
            "topology_penalty_fleet",
            "guarantee_overcommit_ratio",
            "heartbeat_interval_s",
            "dead_after_missed_heartbeats",
            "slow_threshold",
            "slow_consecutive_steps",
            "charge_model",
        ]


class AuditFilterForm(forms.Form):
    kind = forms.ChoiceField(choices=[("", "Any kind"), *AuditEvent.Kind.choices], required=False)
    team = forms.ModelChoiceField(
        queryset=Team.objects.order_by("name"), required=False, empty_label="Any team", to_field_name="slug"
    )


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, help_text="Their login name.")
    role = forms.ChoiceField(
        choices=Membership.Role.choices,
        initial=Membership.Role.MEMBER,
        help_text="Leads submit, request quota and manage members; only fleet admins appoint leads.",
    )

    def __init__(self, *args: Any, may_appoint_leads: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not may_appoint_leads:
            del self.fields["role"]

    def clean_username(self) -> Any:
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise forms.ValidationError(f"No user is called {username!r}.")
        return user
