"""The job history's filters, one set for the jobs page and the API's job list: state, team,
submitter, kind, accelerator and submission dates, each by the name people know it by."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField

from scheduling.models import Job, JobKind


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 time, taken to UTC: Python accepts offsets up to a day, PostgreSQL only to
    ±15:59, and a time near year 1 or 9999 may have no UTC form at all."""

    def to_python(self, value: Any) -> datetime | None:
        moment = super().to_python(value)
        if moment is None:
            return None
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError("Enter a time between the years 1 and 9999 in UTC.", code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=Job.State.choices)
    team = django_filters.CharFilter(field_name="team__slug", help_text="Team slug.")
    user = django_filters.CharFilter(field_name="submitted_by__username", help_text="Submitter's username.")
    kind = django_filters.ChoiceFilter(choices=JobKind.choices)
    accelerator = django_filters.CharFilter(field_name="accelerator_type__name", help_text="Accelerator type name.")
    submitted_after = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    submitted_before = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields: list[str] = []
