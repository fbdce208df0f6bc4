"""The job submission form: hours and minutes for people, seconds for the service.

Each number is bounded here in the form's units (so the message speaks hours or minutes), and the
service checks the same bounds again in seconds, after the conversion."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from core.forms import AsciiFloatField, AsciiIntegerField
from scheduling.limits import (
    MAX_CHECKPOINT_GB,
    MAX_CHECKPOINT_INTERVAL_S,
    MAX_COMMAND_CHARS,
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


class PriorityClassSelect(forms.Select):
    """Each option says which job kind its class is for, so the page can offer only the classes
    that fit the chosen kind."""

    kinds: dict[str, str]

    def create_option(self, name: str, value: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(name, value, *args, **kwargs)
        kind = getattr(self, "kinds", {}).get(str(value))
        if kind:
            option["attrs"]["data-kind"] = kind
        return option


class JobSubmitForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None, help_text="Whose quota it runs on.")
    name = forms.CharField(max_length=200, help_text="For you and your team; it need not be unique.")
    kind = forms.ChoiceField(
        choices=JobKind.choices,
        initial=JobKind.TRAINING,
        help_text="Training and batch yield to serving; serving scales with demand and is not preempted.",
    )
    priority_class = forms.ModelChoiceField(
        queryset=PriorityClass.objects.order_by("-value"),
        empty_label=None,
        widget=PriorityClassSelect,
        help_text="Only the classes for the chosen kind are offered; the normal one is preselected. Higher classes "
        "go first, ahead of your team's older jobs too.",
    )
    accelerator_type = forms.ModelChoiceField(
        queryset=AcceleratorType.objects.order_by("name"),
        empty_label=None,
        label="Accelerator",
        help_text="Defaults to the type your team has the most quota for.",
    )
    gpus = AsciiIntegerField(
        min_value=1,
        max_value=MAX_GANG_GPUS,
        label="GPUs (gang size)",
        help_text="All start together or none does. Above one node's GPUs, whole nodes are taken.",
    )
    min_gpus = AsciiIntegerField(
        min_value=1,
        max_value=MAX_GANG_GPUS,
        required=False,
        label="Elastic: minimum GPUs",
        help_text="Optional. The job may start, or shrink under pressure, down to this many GPUs; it runs "
        "slower in proportion.",
    )
    max_gpus = AsciiIntegerField(
        min_value=1,
        max_value=MAX_GANG_GPUS,
        required=False,
        label="Elastic: maximum GPUs",
        help_text="Optional. The job may grow up to this many GPUs when they are idle.",
    )
    duration_h = AsciiFloatField(
        min_value=0.01,
        max_value=MAX_DURATION_S / 3600,
        label="Work at full size (hours)",
        help_text="How long the job computes on its full gang. It takes longer when shrunk, spread over "
        "pods, or preempted.",
    )
    time_limit_h = AsciiFloatField(
        min_value=0.01,
        max_value=MAX_TIME_LIMIT_S / 3600,
        required=False,
        label="Time limit (hours)",
        help_text="Optional. The job is stopped at this point of its run. A tight limit lets it fill gaps "
        "sooner (backfill); within your team, shorter limits go first.",
    )
    checkpoint_interval_min = AsciiFloatField(
        min_value=1,
        max_value=MAX_CHECKPOINT_INTERVAL_S / 60,
        required=False,
        label="Checkpoint every (minutes)",
        help_text="Optional. After a preemption or failure the job resumes from its last checkpoint; "
        "without checkpoints it starts over.",
    )
    checkpoint_gb = AsciiFloatField(
        min_value=0,
        max_value=MAX_CHECKPOINT_GB,
        required=False,
        initial=0,
        label="Checkpoint size (GB)",
        help_text="What a restart reads back from shared storage: larger checkpoints restore slower.",
    )
    checkpoint_on_preempt = forms.BooleanField(
        required=False,
        label="Checkpoints when preempted",
        help_text="It saves its state within the grace period when told to stop, so a preemption costs only "
        "that period.",
    )
    required_level = forms.ChoiceField(
        choices=LEVEL_CHOICES,
        required=False,
        label="Must fit within",
        help_text="The job waits until its whole gang fits in one domain of this size (node, rack, pod). "
        "Wider gangs run slower.",
    )
    preferred_level = forms.ChoiceField(
        choices=LEVEL_CHOICES,
        required=False,
        label="Prefer within",
        help_text="The scheduler tries this domain size first, then spreads wider rather than wait long.",
    )

    command = forms.CharField(
        required=False,
        strip=False,
        max_length=MAX_COMMAND_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        label="Command or batch script",
        help_text="What every node of the gang runs, with bash, as your cluster account. It sees its GPUs "
        "(CUDA_VISIBLE_DEVICES), FLEETLINE_RANK, FLEETLINE_WORLD_SIZE, FLEETLINE_RESTART_COUNT and "
        "FLEETLINE_CHECKPOINT_DIR, where it should checkpoint (and resume from after a restart).",
    )

    def __init__(self, *args: Any, teams: Any, default_accelerators: dict[int, int] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if settings.FLEETLINE_BACKEND == "modelled":
            # Nothing runs on a modelled fleet: the job is its modelled work.
            del self.fields["command"]
        else:
            # A real job's work is not known ahead; its time limit is what the engine plans with.
            del self.fields["duration_h"]
            self.fields["time_limit_h"].required = True
            self.fields["time_limit_h"].help_text = "The cluster stops the job at this point of its run."
        cast(forms.ModelChoiceField, self.fields["team"]).queryset = teams
        classes = list(PriorityClass.objects.order_by("-value").values_list("pk", "kind"))
        self.fields["priority_class"].widget.kinds = {str(pk): kind for pk, kind in classes}
        # Defaults that submit as they are: the normal class for the default kind (its lowest: a
        # higher class jumps the team's own queue, so it is chosen, never preselected), and the
        # accelerator the first team has the most quota for.
        kind = self.fields["kind"].initial
        self.fields["priority_class"].initial = next((pk for pk, k in reversed(classes) if k == kind), None)
        first_team = teams.first()
        if first_team is not None and default_accelerators:
            self.fields["accelerator_type"].initial = default_accelerators.get(first_team.pk)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        priority, kind = data.get("priority_class"), data.get("kind")
        if priority is not None and kind and priority.kind != kind:
            self.add_error("priority_class", f"Priority class {priority.name} is for {priority.kind} jobs, not {kind}.")
        return data

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
            duration_s=(data.get("duration_h") or data.get("time_limit_h") or 0.0) * 3600.0,
            time_limit_s=seconds("time_limit_h", 3600.0),
            checkpoint_interval_s=seconds("checkpoint_interval_min", 60.0),
            checkpoint_gb=data.get("checkpoint_gb") or 0.0,
            checkpoint_on_preempt=bool(data.get("checkpoint_on_preempt")),
            required_level=data.get("required_level") or "",
            preferred_level=data.get("preferred_level") or "",
            command=data.get("command") or "",
        )

    def add_service_errors(self, error: ValidationError) -> None:
        for key, messages in error.message_dict.items():
            field = FIELD_FOR_ERROR.get(key, key)
            self.add_error(field if field in self.fields else None, messages)
