"""The job submission form: hours and minutes for people, seconds for the service.

Each number is bounded here in the form's units (so the message speaks hours or minutes), and the
service checks the same bounds again in seconds, after the conversion."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from scheduling.limits import (
    MAX_CHECKPOINT_GB,
    MAX_CHECKPOINT_INTERVAL_S,
    MAX_DURATION_S,
    MAX_GANG_GPUS,
    MAX_TIME_LIMIT_S,
)
from scheduling.models import AcceleratorType, JobKind, Level
from scheduling.services.jobs import JobSpec
from tenants.models import PriorityClass, Team

# Service error keys -> form fields.
FIELD_FOR_ERROR = {
    "duration": "duration_h",
    "time_limit": "time_limit_h",
    "checkpoint_interval": "checkpoint_interval_min",
    "accelerator_type": "accelerator_type",
    "priority_class": "priority_class",
}
LEVEL_CHOICES = [("", "any")] + list(Level.choices)


class JobSubmitForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=JobKind.choices, initial=JobKind.TRAINING)
    priority_class = forms.ModelChoiceField(queryset=PriorityClass.objects.order_by("-value"), empty_label=None)
    accelerator_type = forms.ModelChoiceField(queryset=AcceleratorType.objects.order_by("name"), empty_label=None)
    gpus = forms.IntegerField(min_value=1, max_value=MAX_GANG_GPUS, label="GPUs (gang size)")
    min_gpus = forms.IntegerField(min_value=1, max_value=MAX_GANG_GPUS, required=False, label="Elastic: minimum GPUs")
    max_gpus = forms.IntegerField(min_value=1, max_value=MAX_GANG_GPUS, required=False, label="Elastic: maximum GPUs")
    duration_h = forms.FloatField(min_value=0.01, max_value=MAX_DURATION_S / 3600, label="Work at full size (hours)")
    time_limit_h = forms.FloatField(
        min_value=0.01, max_value=MAX_TIME_LIMIT_S / 3600, required=False, label="Time limit (hours)"
    )
    checkpoint_interval_min = forms.FloatField(
        min_value=1, max_value=MAX_CHECKPOINT_INTERVAL_S / 60, required=False, label="Checkpoint every (minutes)"
    )
    checkpoint_gb = forms.FloatField(
        min_value=0, max_value=MAX_CHECKPOINT_GB, required=False, initial=0, label="Checkpoint size (GB)"
    )
    checkpoint_on_preempt = forms.BooleanField(
        required=False,
        label="Checkpoints when preempted",
        help_text="It saves its state within the grace period when told to stop, so a preemption costs only "
        "that period.",
    )
    required_level = forms.ChoiceField(choices=LEVEL_CHOICES, required=False, label="Must fit within")
    preferred_level = forms.ChoiceField(choices=LEVEL_CHOICES, required=False, label="Prefer within")

    def __init__(self, *args: Any, teams: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams

    def spec(self) -> JobSpec:
        data = self.cleaned_data

        def seconds(name: str, factor: float) -> float | None:
            return None if data.get(name) is None else data[name] * factor

        return JobSpec(
            name=data["name"],
            kind=data["kind"],
            priority_class_id=data["priority_class"].pk,
            accelerator_type_id=data["accelerator_type"].pk,
            gpus=data["gpus"],
            min_gpus=data.get("min_gpus"),
            max_gpus=data.get("max_gpus"),
            duration_s=data["duration_h"] * 3600.0,
            time_limit_s=seconds("time_limit_h", 3600.0),
            checkpoint_interval_s=seconds("checkpoint_interval_min", 60.0),
            checkpoint_gb=data.get("checkpoint_gb") or 0.0,
            checkpoint_on_preempt=bool(data.get("checkpoint_on_preempt")),
            required_level=data.get("required_level") or "",
            preferred_level=data.get("preferred_level") or "",
        )

    def add_service_errors(self, error: ValidationError) -> None:
        for key, messages in error.message_dict.items():
            field = FIELD_FOR_ERROR.get(key, key)
            self.add_error(field if field in self.fields else None, messages)
