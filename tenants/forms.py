"""Input validation for the tenants pages; the services decide, the forms only check shapes."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import models

from core.forms import AsciiFloatField, AsciiIntegerField
from fleet.models import AcceleratorType
from tenants import policy_units
from tenants.models import AuditEvent, FleetPolicy, Membership, NoticeKind, PriorityClass, Team
from tenants.selectors import NoticeChannels

MAX_GPUS = 1_000_000


class QuotaRequestForm(forms.Form):
    # Chosen and posted by name, as in the API and the command line; cleaned to the type itself.
    accelerator_type = forms.ModelChoiceField(
        queryset=AcceleratorType.objects.order_by("name"),
        to_field_name="name",
        empty_label=None,
        label="Accelerator type",
        error_messages={
            "invalid_choice": "The fleet has no accelerator type named “%(value)s”: choose one of the list."
        },
    )
    guaranteed = AsciiIntegerField(min_value=0, max_value=MAX_GPUS, label="Guaranteed GPUs")
    borrow_limit = AsciiIntegerField(
        min_value=0, max_value=MAX_GPUS, required=False, help_text="Leave empty for unlimited."
    )
    lend_limit = AsciiIntegerField(
        min_value=0, max_value=MAX_GPUS, required=False, help_text="Leave empty for unlimited."
    )
    justification = forms.CharField(
        min_length=10,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the GPUs are for, and for how long.",
    )

    def __init__(self, *args: Any, accelerator_choices: list[tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if accelerator_choices is not None:
            # The page has already read the accelerator types; rendering needs no second query.
            cast(forms.ChoiceField, self.fields["accelerator_type"]).choices = accelerator_choices


class QuotaSetForm(forms.Form):
    """A fleet admin's direct quota change for one accelerator type (the URL names the type by its
    name)."""

    guaranteed = AsciiIntegerField(min_value=0, max_value=MAX_GPUS, label="Guaranteed")
    borrow_limit = AsciiIntegerField(min_value=0, max_value=MAX_GPUS, required=False, label="Borrow limit")
    lend_limit = AsciiIntegerField(min_value=0, max_value=MAX_GPUS, required=False, label="Lend limit")
    reason = forms.CharField(max_length=2000)


class ApproveForm(forms.Form):
    note = forms.CharField(required=False, max_length=2000)


class RejectForm(forms.Form):
    note = forms.CharField(max_length=2000, error_messages={"required": "Say why the request is rejected."})


class PriorityClassForm(forms.ModelForm):
    class Meta:
        model = PriorityClass
        fields = ["name", "value", "kind", "preemptible", "may_preempt"]


class FleetPolicyForm(forms.Form):
    """The fleet policy in people's units (days, hours, percentages; `tenants.policy_units`): one
    field per stored setting, in the order declared (`scheduling.engine.policy_settings.STORED`).
    Bound or not it starts from ``instance``; once valid, ``cleaned_data`` holds the model's field
    names and units, ready for `fleet_policy_update`."""

    def __init__(self, data: Any = None, *, instance: FleetPolicy, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.model_names: dict[str, str] = {}  # form field -> model field
        for described in policy_units.POLICY_FIELDS:
            model_field = FleetPolicy._meta.get_field(described.name)
            assert isinstance(model_field, models.Field)
            stored = getattr(instance, described.name)
            field: forms.Field
            if described.unit is None:  # a switch or a choice: the column's own form field
                own = model_field.formfield()
                assert own is not None, described.name
                field, name, initial = own, described.name, stored
                field.label, field.help_text = described.label, described.help
            else:
                unit, name = described.unit, described.form_name
                whole = described.knob.kind is int
                field = policy_number_field(described, whole=whole)
                field.required = not described.knob.nullable
                if not whole:
                    field.widget.attrs["step"] = "any"
                shown = unit.to_shown(stored) if stored is not None else None
                initial = int(shown) if shown is not None and float(shown).is_integer() else shown
            self.fields[name] = field
            self.initial.setdefault(name, initial)
            self.model_names[name] = described.name

    def clean(self) -> dict[str, Any]:
        super().clean()
        shown = self.cleaned_data
        stored: dict[str, Any] = {}
        for name, value in shown.items():
            model_name = self.model_names[name]
            described = policy_units.BY_NAME.get(model_name)
            unit = described.unit if described is not None else None
            stored[model_name] = unit.to_stored(value) if unit is not None and value is not None else value
        return stored

    def add_service_errors(self, error: ValidationError) -> None:
        """Errors the service raised by model field, on the form fields that show them."""
        form_names = {model: form for form, model in self.model_names.items()}
        if not hasattr(error, "error_dict"):
            self.add_error(None, error)
            return
        for model_name, messages in error.message_dict.items():
            self.add_error(form_names.get(model_name), messages)


def policy_number_field(described: policy_units.PolicyField, *, whole: bool) -> forms.Field:
    """A policy number in its shown unit, refused outside its bounds with the range in words,
    the same range its help ends with (the policy page's, and the what-if form's)."""
    unit = described.unit
    assert unit is not None
    low, high = described.shown_bounds
    rule = f"Must be {described.shown_range}."
    # Django fills in a message's %(limit_value)s: a literal percent sign is written twice.
    out_of_range = rule.replace("%", "%%")
    shared: dict[str, Any] = {
        "label": f"{described.label} ({unit.suffix})" if unit.suffix else described.label,
        "help_text": f"{described.help} {rule}",
        "error_messages": {"min_value": out_of_range, "max_value": out_of_range},
    }
    if whole:
        return AsciiIntegerField(min_value=int(low), max_value=int(high), **shared)
    return AsciiFloatField(min_value=low, max_value=high, **shared)


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


class NotificationPreferencesForm(forms.Form):
    """Two boxes per kind of notice: in the app, by e-mail. Unticked boxes are off (browsers send
    nothing for them), so every kind is saved on each submit."""

    def __init__(self, *args: Any, initial_channels: dict[str, NoticeChannels], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for kind, label in NoticeKind.choices:
            channels = initial_channels[kind]
            self.fields[f"{kind}__in_app"] = forms.BooleanField(
                required=False, initial=channels.in_app, label=f"{label}: in the app"
            )
            self.fields[f"{kind}__email"] = forms.BooleanField(
                required=False, initial=channels.email, label=f"{label}: by e-mail"
            )

    def rows(self) -> list[tuple[str, forms.BoundField, forms.BoundField]]:
        """Each kind's label with its two boxes, for the table."""
        return [(label, self[f"{kind}__in_app"], self[f"{kind}__email"]) for kind, label in NoticeKind.choices]

    def channels(self) -> dict[str, NoticeChannels]:
        data = self.cleaned_data
        return {
            kind: NoticeChannels(in_app=bool(data[f"{kind}__in_app"]), email=bool(data[f"{kind}__email"]))
            for kind in NoticeKind.values
        }
