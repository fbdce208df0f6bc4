from __future__ import annotations

from datetime import timedelta

from django import forms
from django.utils import timezone


class ReportPeriodForm(forms.Form):
    start = forms.DateField(label="From (inclusive)")
    end = forms.DateField(label="To (inclusive)")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        today = timezone.localdate()
        self.fields["start"].initial = today - timedelta(days=30)
        self.fields["end"].initial = today

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start and end and start > end:
            raise forms.ValidationError("The period must start on or before its end.")
        if start and end and (end - start).days > 366:
            raise forms.ValidationError("A report covers at most one year.")
        return data
